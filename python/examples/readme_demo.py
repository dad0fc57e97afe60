import multiprocessing as mp, time, zimp                 # one publisher, two subscribers

def subscriber(k):
    with zimp.Receiver("pydemo") as rx:                  # gets what is sent from now on
        for data in rx:                                  # ends once every sender has left
            print(f"subscriber {k}: {data.decode()}", flush=True)

if __name__ == "__main__":
    with zimp.create("pydemo"):                          # 256 slots of 4 KiB; unlinked at the end
        subs = [mp.Process(target=subscriber, args=(k,)) for k in range(2)]
        for p in subs: p.start()
        while zimp.info("pydemo").receivers < 2: time.sleep(0.01)   # both have joined
        with zimp.Sender("pydemo") as tx:
            for i in range(3):
                tx.send(f"message {i}".encode())         # or tx.loan(n): write in place
        for p in subs: p.join()
