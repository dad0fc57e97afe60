"""The eMPI thesis's face-detection pipeline (Chapter 8) in Python over several transports.

reader -> detector(s) -> writer, one process each. The reader decodes each 640x480 BGR
frame (or, with --detect off, copies a pre-decoded one: a stand-in for decoding), the
detectors run OpenCV's stock Haar cascade, the writer draws the boxes and encodes an
MP4 plus a PNG contact sheet. --detectors 3 runs three detectors with different
parameters on every frame (one-to-many).

Transports (--transport):
  zimp       frames in a zimp shared heap, 16-byte handles over zimp channels (the
             thesis's design). The reader decodes straight into the heap block and
             keeps its reference until the writer hands the handle back on a "done"
             channel (at most --inflight frames out).
  zimp-slot  frames written in place in 1 MiB slots of one zimp channel that the
             detectors and the writer all receive (one send reaches all); boxes go to
             the writer on a second channel.
  zimp-large the zimp-slot stages on a channel created with a heap: a frame is a large
             message, loaned and read in place in a heap block that the library keeps
             until every receiver is done with it (no hand-back by the application).
  queue      multiprocessing.Queue with pickled frames (what people write by default).
  pipe       multiprocessing.Pipe(duplex=False): os.pipe, pickled frames.
  unix       multiprocessing.Pipe(duplex=True): a Unix socketpair, pickled frames.
  shm        multiprocessing.shared_memory ring of frames used in ring order, counting
             multiprocessing.Semaphores per stage, boxes in a table in the same segment
             (what a careful user writes with the standard library).
  shm-queue  the same ring, slot indices handed on through multiprocessing.Queue and
             free slots returned by the writer (what the documentation suggests).

Prints one JSON line: frames/s end to end, CPU per frame spent outside the stages' own
work (communication), and the frame bytes the transport copies per frame.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import pickle
import resource
import struct
import sys
import time
import uuid
from dataclasses import dataclass, field
from typing import Callable, Optional

# One thread per stage for every transport: OpenCV is told so below; NumPy's OpenBLAS
# would otherwise start a pool per process whose idle threads spin (CPU that the
# measure would count as communication). Spawned stages inherit the environment.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:            # spawned stages import make_video from here
    sys.path.insert(0, HERE)

H, W = 480, 640
FRAME_BYTES = H * W * 3
SHAPE = (H, W, 3)
U8 = np.dtype(np.uint8)
# Haar parameters (scaleFactor, minNeighbors) of each detector in the 1->N variant.
DETECTOR_PARAMS = [(1.1, 4), (1.2, 3), (1.3, 5)]
TRANSPORTS = ["zimp", "zimp-slot", "zimp-large", "queue", "pipe", "unix", "shm", "shm-queue"]
BOXES = struct.Struct("=iii")           # frame index, detector, box count; then boxes
BOX_HEAD = struct.Struct("=ii")         # detector, box count (after the frame index)


# ---------------------------------------------------------------- measurement ----

@dataclass
class Meter:
    """Per-stage accounting: process CPU over the run minus the stage's own work."""
    role: str
    frames: int = 0
    work_ns: int = 0
    t_start: float = 0.0
    t_end: float = 0.0
    cpu_start: float = field(default=0.0)

    def start(self) -> None:
        self.t_start = time.monotonic()
        self.cpu_start = _process_cpu()

    def work(self, fn: Callable, *args: object) -> object:
        """Runs fn as application work (not communication), timing its thread CPU."""
        t = time.thread_time_ns()
        out = fn(*args)
        self.work_ns += time.thread_time_ns() - t
        return out

    def result(self) -> dict:
        self.t_end = time.monotonic()
        cpu = _process_cpu() - self.cpu_start
        return {"role": self.role, "frames": self.frames, "cpu_s": cpu,
                "work_s": self.work_ns / 1e9, "t_start": self.t_start, "t_end": self.t_end}


def _process_cpu() -> float:
    """CPU seconds of this process, all threads (mp.Queue pickles in a feeder thread)."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


# ------------------------------------------------------------- application work ----

class Source:
    """Frames for the reader: decoded from the video, or copied from memory (--detect off)."""

    def __init__(self, video: str, frames: int, decode: bool, stamp: bool = False) -> None:
        import cv2
        cv2.setNumThreads(1)             # one thread per stage, for every transport
        self.decode = decode
        self.stamp = stamp
        self.cap = cv2.VideoCapture(video) if decode else None
        self.cache: list[np.ndarray] = []
        if not decode:
            import make_video
            self.cache = make_video.frames(min(frames, 30))
        self.n = 0

    def fill(self, out: np.ndarray) -> None:
        """Writes the next frame into `out` (decoding straight into it when possible)."""
        if self.decode:
            ok, got = self.cap.read(out)
            if not ok:                       # loop the clip
                self.cap.set(1, 0)           # CAP_PROP_POS_FRAMES
                ok, got = self.cap.read(out)
            if got is not out and got.ctypes.data != out.ctypes.data:
                np.copyto(out, got)          # OpenCV reallocated: one extra copy
        elif self.stamp:                     # transfer cost only: 8 bytes written
            out.reshape(-1)[:8] = np.frombuffer(self.n.to_bytes(8, "little"), np.uint8)
        else:
            np.copyto(out, self.cache[self.n % len(self.cache)])
        self.n += 1


def make_detector(k: int, detect: bool) -> Callable[[np.ndarray], np.ndarray]:
    """Detector k: Haar cascade with DETECTOR_PARAMS[k]; returns boxes as int32 (n, 4)."""
    if not detect:
        return lambda frame: np.zeros((0, 4), np.int32)
    import cv2
    cv2.setNumThreads(1)
    cascade = cv2.CascadeClassifier(cv2.data.haarcascades +
                                    "haarcascade_frontalface_default.xml")
    scale, neighbours = DETECTOR_PARAMS[k]

    def run(frame: np.ndarray) -> np.ndarray:
        gray = cv2.cvtColor(frame, cv2.COLOR_BGR2GRAY)
        boxes = cascade.detectMultiScale(gray, scale, neighbours, minSize=(60, 60))
        return np.asarray(boxes, np.int32).reshape(-1, 4)
    return run


class Sink:
    """The writer's work: draw boxes on a copy, encode MP4, keep thumbnails."""
    COLOURS = [(0, 0, 255), (0, 255, 0), (255, 0, 0)]

    def __init__(self, out_dir: Optional[str], tag: str) -> None:
        self.out_dir = out_dir
        self.video = None
        self.thumbs: list[np.ndarray] = []
        self.faces = 0
        self.tag = tag

    def take(self, idx: int, frame: np.ndarray, boxes: list[np.ndarray]) -> None:
        self.faces += sum(len(b) for b in boxes)
        if not self.out_dir:
            int(frame[0, 0, 0])          # touch the frame: it arrived
            return
        import cv2
        img = frame.copy()               # the frame is read-only shared memory
        for k, bs in enumerate(boxes):
            for x, y, w, h in bs:
                cv2.rectangle(img, (int(x), int(y)), (int(x + w), int(y + h)),
                              self.COLOURS[k % 3], 2 + k)
        if self.video is None:
            self.video = cv2.VideoWriter(os.path.join(self.out_dir, f"{self.tag}.mp4"),
                                         cv2.VideoWriter_fourcc(*"mp4v"), 30, (W, H))
        self.video.write(img)
        if idx % 10 == 0 and len(self.thumbs) < 12:
            self.thumbs.append(cv2.resize(img, (W // 4, H // 4)))

    def close(self) -> None:
        if self.video is not None:
            import cv2
            self.video.release()
            rows = [np.hstack((self.thumbs + [np.zeros_like(self.thumbs[0])] * 4)[r:r + 4])
                    for r in range(0, len(self.thumbs), 4)]
            cv2.imwrite(os.path.join(self.out_dir, f"{self.tag}-contact.png"), np.vstack(rows))


# ------------------------------------------------------------------ zimp roles ----

def set_spin(cfg: dict, *handles) -> None:
    """The waiting policy of every zimp handle of a stage (--spin)."""
    import zimp
    named = {"adaptive": zimp.SPIN_ADAPTIVE, "block": zimp.SPIN_BLOCK, "busy": zimp.SPIN_BUSY}
    policy = named[cfg["spin"]] if cfg["spin"] in named else int(cfg["spin"])
    for h in handles:
        h.set_spin(policy)


def zimp_reader(cfg: dict, barrier, results) -> None:
    """Heap blocks, handles over channel F; blocks released when the writer hands back."""
    import zimp
    src = Source(cfg["video"], cfg["frames"], cfg["detect"], cfg["stamp"])
    m = Meter("reader")
    inflight = cfg["inflight"]
    with zimp.Heap(cfg["name"]) as heap, zimp.Sender(cfg["name"] + "-f") as tx, \
            zimp.Receiver(cfg["name"] + "-d") as done:
        set_spin(cfg, tx, done)
        held: dict[bytes, zimp.Block] = {}      # by handle: what comes back on "done"
        alloc, send, recv = heap.alloc, tx.send, done.recv
        barrier.wait()
        m.start()
        for i in range(cfg["frames"]):
            while len(held) >= inflight:
                held.pop(recv()).release()
            block = alloc(FRAME_BYTES)
            frame = np.ndarray(SHAPE, U8, block.view)
            m.work(src.fill, frame)
            del frame
            handle = block.handle
            held[handle] = block
            send(handle + i.to_bytes(4, "little"))
            m.frames += 1
        while held:
            held.pop(recv()).release()
    results.put(m.result())


def zimp_detector(cfg: dict, k: int, barrier, results) -> None:
    """Resolves each handle, detects, forwards handle + boxes; releases its reference."""
    import zimp
    detect = make_detector(k, cfg["detect"])
    m = Meter(f"detector{k}")
    with zimp.Heap(cfg["name"]) as heap, zimp.Receiver(cfg["name"] + "-f") as rx, \
            zimp.Sender(cfg["name"] + "-b") as tx:
        set_spin(cfg, rx, tx)
        resolve, send = heap.resolve, tx.send
        barrier.wait()
        m.start()
        for data in rx:                          # handle (16 B) + frame index (4 B)
            with resolve(data) as block:
                frame = np.ndarray(SHAPE, U8, block.view)
                boxes = m.work(detect, frame)
                del frame
            send(data + BOX_HEAD.pack(k, len(boxes)) + boxes.tobytes())
            m.frames += 1
    results.put(m.result())


def zimp_writer(cfg: dict, barrier, results) -> None:
    """Collects every detector's boxes for a frame, resolves it, draws, hands it back."""
    import zimp
    sink = Sink(cfg["out"], cfg["tag"])
    m = Meter("writer")
    n_det = cfg["detectors"]
    pending: dict[int, list] = {}
    with zimp.Heap(cfg["name"]) as heap, zimp.Receiver(cfg["name"] + "-b") as rx, \
            zimp.Sender(cfg["name"] + "-d") as done:
        set_spin(cfg, rx, done)
        resolve, recv, send = heap.resolve, rx.recv, done.send
        barrier.wait()
        m.start()
        while m.frames < cfg["frames"]:
            data = recv()               # handle, frame index, detector, box count, boxes
            idx, k, n = BOXES.unpack_from(data, 16)
            boxes = np.frombuffer(data, np.int32, n * 4, 16 + BOXES.size).reshape(n, 4)
            if n_det > 1:
                parts = pending.setdefault(idx, [None] * n_det)
                parts[k] = boxes
                if any(p is None for p in parts):
                    continue
                del pending[idx]
            else:
                parts = [boxes]
            with resolve(data) as block:
                frame = np.ndarray(SHAPE, U8, block.view)
                m.work(sink.take, idx, frame, parts)
                del frame
            send(data[:16])
            m.frames += 1
    m.work(sink.close)
    results.put({**m.result(), "faces": sink.faces})


def zimp_setup(cfg: dict) -> Callable[[], None]:
    """Creates the heap and channels; returns the clean-up."""
    import zimp
    name, n_det = cfg["name"], cfg["detectors"]
    zimp.Heap.create(name, (cfg["inflight"] + 2) * (FRAME_BYTES + 4096))
    zimp.create(name + "-f", slots=64, slot_size=64)
    zimp.create(name + "-b", slots=64, slot_size=4096, max_senders=n_det + 1)
    zimp.create(name + "-d", slots=64, slot_size=64)

    def cleanup() -> None:
        for suffix in ("-f", "-b", "-d"):
            zimp.unlink(name + suffix, missing_ok=True)
        zimp.Heap.unlink(name, missing_ok=True)
    return cleanup


# ------------------------------------------------------------- zimp-slot roles ----

def slot_reader(cfg: dict, barrier, results) -> None:
    """Loans a 1 MiB slot, decodes into it, publishes: detectors and writer all get it."""
    import zimp
    src = Source(cfg["video"], cfg["frames"], cfg["detect"], cfg["stamp"])
    m = Meter("reader")
    with zimp.Sender(cfg["name"] + "-f") as tx:
        set_spin(cfg, tx)
        loan = tx.loan
        barrier.wait()
        m.start()
        for i in range(cfg["frames"]):
            with loan(FRAME_BYTES) as slot:
                frame = np.ndarray(SHAPE, U8, slot.view)
                m.work(src.fill, frame)
                del frame
            m.frames += 1
    results.put(m.result())


def slot_detector(cfg: dict, k: int, barrier, results) -> None:
    """Reads each frame in place, sends its boxes to the writer."""
    import zimp
    detect = make_detector(k, cfg["detect"])
    m = Meter(f"detector{k}")
    with zimp.Receiver(cfg["name"] + "-f") as rx, zimp.Sender(cfg["name"] + "-b") as tx:
        set_spin(cfg, rx, tx)
        read, send = rx.read, tx.send
        barrier.wait()
        m.start()
        for idx in range(cfg["frames"]):
            with read() as msg:
                frame = np.ndarray(SHAPE, U8, msg.view)
                boxes = m.work(detect, frame)
                del frame
            send(BOXES.pack(idx, k, len(boxes)) + boxes.tobytes())
            m.frames += 1
    results.put(m.result())


def slot_writer(cfg: dict, barrier, results) -> None:
    """Reads each frame in place (it is a receiver of the frame channel too)."""
    import zimp
    sink = Sink(cfg["out"], cfg["tag"])
    m = Meter("writer")
    n_det = cfg["detectors"]
    with zimp.Receiver(cfg["name"] + "-f") as frames, zimp.Receiver(cfg["name"] + "-b") as rx:
        set_spin(cfg, frames, rx)
        read, recv = frames.read, rx.recv
        barrier.wait()
        m.start()
        pending: dict[int, list] = {}     # boxes of later frames (several detectors)
        for idx in range(cfg["frames"]):
            # The boxes first: once a detector has sent them the frame is published,
            # so the read below never waits (one wait per frame, as in every stage).
            parts = pending.pop(idx, None)
            if parts is None:
                parts, missing = [None] * n_det, n_det
            else:
                missing = sum(p is None for p in parts)
            while missing:
                data = recv()
                i, k, n = BOXES.unpack_from(data)
                boxes = np.frombuffer(data, np.int32, n * 4, BOXES.size).reshape(n, 4)
                if i == idx:
                    parts[k] = boxes
                    missing -= 1
                else:
                    pending.setdefault(i, [None] * n_det)[k] = boxes
            msg = read()
            frame = np.ndarray(SHAPE, U8, msg.view)
            m.work(sink.take, idx, frame, parts)
            del frame
            msg.release()
            m.frames += 1
    m.work(sink.close)
    results.put({**m.result(), "faces": sink.faces})


def slot_setup(cfg: dict, large: bool = False) -> Callable[[], None]:
    """Frames in 1 MiB slots, or (large) in the blocks of a heap the channel carries."""
    import zimp
    name = cfg["name"]
    if large:       # 64 B slots: a frame is a large message, the slot holds its handle
        zimp.Heap.create(name, (cfg["inflight"] + 2) * (FRAME_BYTES + 4096))
        zimp.create(name + "-f", slots=cfg["inflight"], slot_size=64,
                    max_receivers=cfg["detectors"] + 1, heap=name)
    else:
        zimp.create(name + "-f", slots=cfg["inflight"], slot_size=1 << 20,
                    max_receivers=cfg["detectors"] + 1)
    zimp.create(name + "-b", slots=64, slot_size=4096, max_senders=cfg["detectors"] + 1)

    def cleanup() -> None:
        for suffix in ("-f", "-b"):
            zimp.unlink(name + suffix, missing_ok=True)
        if large:
            zimp.Heap.unlink(name, missing_ok=True)
    return cleanup


# ------------------------------------------------- pickling transports (Queue/Pipe) ----

class Links:
    """reader->detector k and detector k->writer links for queue, pipe and unix."""

    def __init__(self, ctx, kind: str, n_det: int, inflight: int) -> None:
        self.kind = kind
        if kind == "queue":
            self.to_det = [ctx.Queue(inflight) for _ in range(n_det)]
            self.to_wr = [ctx.Queue(inflight) for _ in range(n_det)]
        else:
            duplex = kind == "unix"       # Pipe(duplex=True) is socket.socketpair(AF_UNIX)
            self.to_det = [mp.Pipe(duplex) for _ in range(n_det)]
            self.to_wr = [mp.Pipe(duplex) for _ in range(n_det)]

    @staticmethod
    def put(link, obj) -> None:
        link.put(obj) if isinstance(link, mp.queues.Queue) else link[1].send(obj)

    @staticmethod
    def get(link):
        return link.get() if isinstance(link, mp.queues.Queue) else link[0].recv()


def pk_reader(cfg: dict, links: Links, barrier, results) -> None:
    """Decodes into a fresh array and sends it (pickled) to every detector."""
    src = Source(cfg["video"], cfg["frames"], cfg["detect"], cfg["stamp"])
    m = Meter("reader")
    barrier.wait()
    m.start()
    for i in range(cfg["frames"]):
        frame = np.empty((H, W, 3), np.uint8)
        m.work(src.fill, frame)
        for link in links.to_det:
            links.put(link, (i, frame))
        m.frames += 1
    for link in links.to_det:
        links.put(link, None)
    _flush(links.to_det)
    results.put(m.result())


def pk_detector(cfg: dict, links: Links, k: int, barrier, results) -> None:
    """Detects; detector 0 forwards the frame with its boxes, the others boxes only."""
    detect = make_detector(k, cfg["detect"])
    m = Meter(f"detector{k}")
    barrier.wait()
    m.start()
    while (item := links.get(links.to_det[k])) is not None:
        i, frame = item
        boxes = m.work(detect, frame)
        links.put(links.to_wr[k], (i, boxes, frame if k == 0 else None))
        m.frames += 1
    _flush(links.to_wr[k:k + 1])
    results.put(m.result())


def pk_writer(cfg: dict, links: Links, barrier, results) -> None:
    sink = Sink(cfg["out"], cfg["tag"])
    m = Meter("writer")
    barrier.wait()
    m.start()
    for i in range(cfg["frames"]):
        parts = [links.get(link) for link in links.to_wr]
        m.work(sink.take, i, parts[0][2], [p[1] for p in parts])
        m.frames += 1
    m.work(sink.close)
    results.put({**m.result(), "faces": sink.faces})


def _flush(links: list) -> None:
    """mp.Queue sends from a feeder thread: wait for it before reporting CPU time."""
    for link in links:
        if isinstance(link, mp.queues.Queue):
            link.close()
            link.join_thread()


# ------------------------------------------------------- shared_memory hand-rolled ----
#
# shm: what a careful user writes with the standard library alone. A ring of `inflight`
# frames in one multiprocessing.shared_memory segment, used in ring order (frame i in
# slot i % inflight), so no index travels: counting semaphores say how many slots are
# ready for each stage (the textbook bounded buffer; a POSIX semaphore is a futex, no
# system call unless someone waits), and each detector writes its boxes into a per-slot
# table in the same segment. No pickling, no feeder thread, nothing copied.
#
# shm-queue: the first version, what the multiprocessing documentation suggests: the same
# ring, with slot indices handed on through multiprocessing.Queue (pickled, one feeder
# thread per queue) and free slots returned by the writer.

MAX_BOXES = 64                   # boxes per frame and detector kept in the shm table


class ShmRing:
    """The frame ring and the box table, over one SharedMemory segment."""

    def __init__(self, name: str, inflight: int, n_det: int, create: bool = False) -> None:
        from multiprocessing import shared_memory
        frames = inflight * FRAME_BYTES
        size = frames + inflight * n_det * (1 + MAX_BOXES * 4) * 4
        self.shm = shared_memory.SharedMemory(name, create=create, size=size if create else 0)
        self.frames = np.ndarray((inflight, H, W, 3), np.uint8, self.shm.buf)
        # per slot and detector: the box count, then up to MAX_BOXES boxes (int32)
        self.boxes = np.ndarray((inflight, n_det, 1 + MAX_BOXES * 4), np.int32,
                                self.shm.buf, frames)

    def put_boxes(self, slot: int, k: int, boxes: np.ndarray) -> None:
        n = min(len(boxes), MAX_BOXES)
        row = self.boxes[slot, k]
        row[1:1 + 4 * n] = boxes[:n].reshape(-1)
        row[0] = n

    def get_boxes(self, slot: int, k: int) -> np.ndarray:
        row = self.boxes[slot, k]
        return row[1:1 + 4 * int(row[0])].reshape(-1, 4)

    def close(self) -> None:
        del self.frames, self.boxes
        self.shm.close()


def shm_setup(cfg: dict, ctx) -> tuple:
    """The ring, and the semaphores: free slots, frames ready per detector, boxes ready."""
    n_det, n = cfg["detectors"], cfg["inflight"]
    ring = ShmRing(cfg["name"], n, n_det, create=True)
    sem = {"free": ctx.Semaphore(n), "det": [ctx.Semaphore(0) for _ in range(n_det)],
           "wr": [ctx.Semaphore(0) for _ in range(n_det)]}

    def cleanup() -> None:
        ring.close()
        ring.shm.unlink()
    return sem, cleanup


def shm_reader(cfg: dict, sem, barrier, results) -> None:
    """Waits for a free slot, writes frame i into slot i % inflight, signals detectors."""
    src = Source(cfg["video"], cfg["frames"], cfg["detect"], cfg["stamp"])
    ring = ShmRing(cfg["name"], cfg["inflight"], cfg["detectors"])
    free, ready = sem["free"], sem["det"]
    n = cfg["inflight"]
    m = Meter("reader")
    barrier.wait()
    m.start()
    for i in range(cfg["frames"]):
        free.acquire()
        m.work(src.fill, ring.frames[i % n])
        for s in ready:
            s.release()
        m.frames += 1
    ring.close()
    results.put(m.result())


def shm_detector(cfg: dict, sem, k: int, barrier, results) -> None:
    """Detects on each slot in ring order, writes its boxes into the slot's table."""
    detect = make_detector(k, cfg["detect"])
    ring = ShmRing(cfg["name"], cfg["inflight"], cfg["detectors"])
    ready, done = sem["det"][k], sem["wr"][k]
    n = cfg["inflight"]
    m = Meter(f"detector{k}")
    barrier.wait()
    m.start()
    for i in range(cfg["frames"]):
        ready.acquire()
        slot = i % n
        boxes = m.work(detect, ring.frames[slot])
        ring.put_boxes(slot, k, boxes)
        done.release()
        m.frames += 1
    ring.close()
    results.put(m.result())


def shm_writer(cfg: dict, sem, barrier, results) -> None:
    """Waits for every detector's boxes of frame i, draws, gives the slot back."""
    ring = ShmRing(cfg["name"], cfg["inflight"], cfg["detectors"])
    done, free = sem["wr"], sem["free"]
    n, n_det = cfg["inflight"], cfg["detectors"]
    sink = Sink(cfg["out"], cfg["tag"])
    m = Meter("writer")
    barrier.wait()
    m.start()
    for i in range(cfg["frames"]):
        for s in done:
            s.acquire()
        slot = i % n
        m.work(sink.take, i, ring.frames[slot], [ring.get_boxes(slot, k) for k in range(n_det)])
        free.release()
        m.frames += 1
    m.work(sink.close)
    ring.close()
    results.put({**m.result(), "faces": sink.faces})


def shmq_reader(cfg: dict, q, barrier, results) -> None:
    """Takes a free index, writes the frame into that buffer, hands the index on."""
    src = Source(cfg["video"], cfg["frames"], cfg["detect"], cfg["stamp"])
    ring = ShmRing(cfg["name"], cfg["inflight"], cfg["detectors"])
    m = Meter("reader")
    barrier.wait()
    m.start()
    for i in range(cfg["frames"]):
        slot = q["free"].get()
        m.work(src.fill, ring.frames[slot])
        for dq in q["det"]:
            dq.put((i, slot))
        m.frames += 1
    for dq in q["det"]:
        dq.put(None)
    _flush(q["det"])
    ring.close()
    results.put(m.result())


def shmq_detector(cfg: dict, q, k: int, barrier, results) -> None:
    detect = make_detector(k, cfg["detect"])
    ring = ShmRing(cfg["name"], cfg["inflight"], cfg["detectors"])
    m = Meter(f"detector{k}")
    barrier.wait()
    m.start()
    while (item := q["det"][k].get()) is not None:
        i, slot = item
        boxes = m.work(detect, ring.frames[slot])
        q["wr"][k].put((i, slot, boxes))
        m.frames += 1
    _flush(q["wr"][k:k + 1])
    ring.close()
    results.put(m.result())


def shmq_writer(cfg: dict, q, barrier, results) -> None:
    ring = ShmRing(cfg["name"], cfg["inflight"], cfg["detectors"])
    sink = Sink(cfg["out"], cfg["tag"])
    m = Meter("writer")
    barrier.wait()
    m.start()
    for i in range(cfg["frames"]):
        parts = [wq.get() for wq in q["wr"]]
        slot = parts[0][1]
        m.work(sink.take, i, ring.frames[slot], [p[2] for p in parts])
        q["free"].put(slot)
        m.frames += 1
    m.work(sink.close)
    _flush([q["free"]])
    ring.close()
    results.put({**m.result(), "faces": sink.faces})


def shmq_setup(cfg: dict, ctx) -> tuple:
    ring = ShmRing(cfg["name"], cfg["inflight"], cfg["detectors"], create=True)
    n_det = cfg["detectors"]
    q = {"free": ctx.Queue(), "det": [ctx.Queue() for _ in range(n_det)],
         "wr": [ctx.Queue() for _ in range(n_det)]}
    for s in range(cfg["inflight"]):
        q["free"].put(s)

    def cleanup() -> None:
        ring.close()
        ring.shm.unlink()
    return q, cleanup


# -------------------------------------------------------------------- driver ----

def copies_per_frame(transport: str, n_det: int) -> int:
    """Frame bytes the transport itself copies per frame (by construction of the code).

    Pickling transports: per frame-carrying hop, pickle (1), kernel write (1), kernel
    read (1), unpickle (1); hops: reader -> each detector, detector 0 -> writer.
    Shared-memory transports: the frame is written once by the reader and read in place.
    """
    if transport in ("queue", "pipe", "unix"):
        return 4 * (n_det + 1) * FRAME_BYTES
    return 0


def run(cfg: dict) -> dict:
    """Starts the stages, waits for them, returns the measurement."""
    ctx = mp.get_context("spawn")   # no OpenCV/thread state inherited
    n_det, t = cfg["detectors"], cfg["transport"]
    barrier = ctx.Barrier(n_det + 2)
    results = ctx.Queue()
    cleanup: Callable[[], None] = lambda: None
    if t == "zimp":
        cleanup = zimp_setup(cfg)
        roles = [(zimp_reader, ()), (zimp_writer, ())] + [(zimp_detector, (k,)) for k in range(n_det)]
    elif t in ("zimp-slot", "zimp-large"):
        cleanup = slot_setup(cfg, large=t == "zimp-large")
        roles = [(slot_reader, ()), (slot_writer, ())] + [(slot_detector, (k,)) for k in range(n_det)]
    elif t == "shm":
        sem, cleanup = shm_setup(cfg, ctx)
        roles = [(shm_reader, (sem,)), (shm_writer, (sem,))] + \
            [(shm_detector, (sem, k)) for k in range(n_det)]
    elif t == "shm-queue":
        q, cleanup = shmq_setup(cfg, ctx)
        roles = [(shmq_reader, (q,)), (shmq_writer, (q,))] + \
            [(shmq_detector, (q, k)) for k in range(n_det)]
    else:
        links = Links(ctx, t, n_det, cfg["inflight"])
        roles = [(pk_reader, (links,)), (pk_writer, (links,))] + [(pk_detector, (links, k)) for k in range(n_det)]
    procs = []
    try:
        for fn, extra in roles:
            args = (cfg, *extra, barrier, results)
            procs.append(ctx.Process(target=fn, args=args, daemon=True))
            procs[-1].start()
        stats = [results.get(timeout=cfg["timeout"]) for _ in procs]
        for p in procs:
            p.join(10)
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
        cleanup()
    return summarise(cfg, stats)


def summarise(cfg: dict, stats: list[dict]) -> dict:
    frames = cfg["frames"]
    t0 = min(s["t_start"] for s in stats)
    t1 = max(s["t_end"] for s in stats)
    comm = sum(max(s["cpu_s"] - s["work_s"], 0.0) for s in stats)
    writer = next(s for s in stats if s["role"] == "writer")
    return {"transport": cfg["transport"], "detect": cfg["detect"],
            "fill": "stamp" if cfg["stamp"] else ("decode" if cfg["detect"] else "copy"),
            "detectors": cfg["detectors"], "frames": frames,
            "fps": frames / (t1 - t0), "seconds": t1 - t0,
            "comm_cpu_us_per_frame": comm / frames * 1e6,
            "total_cpu_ms_per_frame": sum(s["cpu_s"] for s in stats) / frames * 1e3,
            "copied_bytes_per_frame": copies_per_frame(cfg["transport"], cfg["detectors"]),
            "faces_per_frame": writer.get("faces", 0) / frames,
            "stages_us_per_frame": {s["role"]: {"cpu": s["cpu_s"] / frames * 1e6,
                                                "work": s["work_s"] / frames * 1e6}
                                    for s in stats},
            "loadavg": os.getloadavg()}


def main(argv: Optional[list[str]] = None) -> dict:
    ap = argparse.ArgumentParser(description="face-detection pipeline over a transport")
    ap.add_argument("--transport", choices=TRANSPORTS, default="zimp")
    ap.add_argument("--video", default=None, help="input MP4 (made if missing)")
    ap.add_argument("--frames", type=int, default=90)
    ap.add_argument("--detectors", type=int, choices=(1, 2, 3), default=1)
    ap.add_argument("--detect", choices=("on", "off"), default="on")
    ap.add_argument("--fill", choices=("copy", "stamp"), default="copy",
                    help="--detect off: copy a whole frame in (default) or stamp 8 bytes")
    ap.add_argument("--out", default=None, help="folder for the MP4 and contact sheet")
    ap.add_argument("--inflight", type=int, default=8, help="frames in flight at most")
    ap.add_argument("--timeout", type=float, default=120)
    ap.add_argument("--spin", default="adaptive",
                    help="zimp transports: the handles' waiting policy: adaptive, block, "
                    "busy, or a spin budget in ns")
    a = ap.parse_args(argv)
    video = a.video or os.path.join(a.out or "/tmp", "face_pipeline_input.mp4")
    if a.out:
        os.makedirs(a.out, exist_ok=True)
    if a.detect == "on" and not os.path.exists(video):
        import make_video
        make_video.write(video, 150)
    cfg = {"transport": a.transport, "video": video, "frames": a.frames,
           "detectors": a.detectors, "detect": a.detect == "on",
           "out": a.out if a.detect == "on" else None, "inflight": a.inflight,
           "timeout": a.timeout, "stamp": a.fill == "stamp", "spin": a.spin, "tag": f"{a.transport}-{a.detectors}",
           "name": f"facepipe-{os.getpid()}-{uuid.uuid4().hex[:6]}"}
    res = run(cfg)
    print(json.dumps(res), flush=True)
    return res


if __name__ == "__main__":
    main()
