import multiprocessing as mp, zimp                       # one publisher, two subscribers

def subscriber(k, joined):
    with zimp.Receiver("pydemo") as rx:                  # gets what is sent from now on
        joined.release()                                 # tell the publisher
        for data in rx:                                  # ends once every sender has left
            print(f"subscriber {k}: {data.decode()}", flush=True)

if __name__ == "__main__":
    with zimp.create("pydemo"):                          # 256 slots of 4 KiB; unlinked at the end
        joined = mp.Semaphore(0)
        subs = [mp.Process(target=subscriber, args=(k, joined)) for k in range(2)]
        for p in subs: p.start()
        for p in subs: joined.acquire()                  # both receivers are open
        with zimp.Sender("pydemo") as tx:
            for i in range(3):
                tx.send(f"message {i}".encode())         # or tx.loan(n): write in place
        for p in subs: p.join()
