"""Makes the synthetic input video: cartoon faces drawn with OpenCV, moving over a
textured background, that OpenCV's stock Haar cascade (haarcascade_frontalface_default)
detects. Each face is a skin-tone ellipse with hair, brows, eyes (white, dark pupil),
a nose shadow and a mouth, slightly blurred: the dark-eyes/light-cheeks contrast the
cascade's first stages look for.

    python3 make_video.py out.mp4 --frames 150
"""
from __future__ import annotations

import argparse
import math

import cv2
import numpy as np

WIDTH, HEIGHT, FPS = 640, 480, 30


def draw_face(img: np.ndarray, cx: int, cy: int, s: int) -> None:
    """A frontal cartoon face of height ~1.1*s centred at (cx, cy), drawn in place."""
    skin, dark = (150, 180, 220), (30, 30, 30)
    cv2.ellipse(img, (cx, cy), (int(s * .42), int(s * .55)), 0, 0, 360, skin, -1)
    cv2.ellipse(img, (cx, cy - int(s * .45)), (int(s * .45), int(s * .2)), 0, 180, 360,
                (30, 40, 60), -1)
    for side in (-1, 1):
        ex, ey = cx + side * int(s * .17), cy - int(s * .1)
        cv2.ellipse(img, (ex, ey - int(s * .09)), (int(s * .11), int(s * .025)), 0, 0, 360,
                    (40, 40, 60), -1)
        cv2.ellipse(img, (ex, ey), (int(s * .08), int(s * .04)), 0, 0, 360, (250, 250, 250), -1)
        cv2.circle(img, (ex, ey), int(s * .035), dark, -1)
    cv2.ellipse(img, (cx, cy + int(s * .08)), (int(s * .04), int(s * .1)), 0, 0, 360,
                (120, 140, 180), -1)
    cv2.ellipse(img, (cx, cy + int(s * .28)), (int(s * .15), int(s * .04)), 0, 0, 360,
                (60, 60, 150), -1)


def background(rng: np.random.Generator) -> np.ndarray:
    """A greenish, gently noisy background (so frames are not trivially compressible)."""
    base = np.full((HEIGHT, WIDTH, 3), (90, 110, 100), np.uint8)
    noise = rng.integers(-12, 12, size=(HEIGHT // 8, WIDTH // 8, 3), dtype=np.int16)
    noise = cv2.resize(noise.astype(np.float32), (WIDTH, HEIGHT)).astype(np.int16)
    return np.clip(base.astype(np.int16) + noise, 0, 255).astype(np.uint8)


def frame(i: int, bg: np.ndarray) -> np.ndarray:
    """Frame i: two faces drifting on Lissajous paths, a third one every other second."""
    img = bg.copy()
    t = i / FPS
    draw_face(img, int(190 + 60 * math.sin(t * 1.3)), int(240 + 30 * math.cos(t)), 150)
    draw_face(img, int(470 + 40 * math.cos(t * 0.9)), int(210 + 40 * math.sin(t * 1.7)), 120)
    if int(t) % 2 == 0:
        draw_face(img, int(330 + 80 * math.sin(t * 2.1)), 400, 90)
    return cv2.GaussianBlur(img, (5, 5), 0)


def frames(n: int, seed: int = 1) -> list[np.ndarray]:
    """The first n frames, in memory."""
    bg = background(np.random.default_rng(seed))
    return [frame(i, bg) for i in range(n)]


def write(path: str, n: int) -> None:
    """Writes n frames to an MP4 (mp4v) file."""
    out = cv2.VideoWriter(path, cv2.VideoWriter_fourcc(*"mp4v"), FPS, (WIDTH, HEIGHT))
    if not out.isOpened():
        raise SystemExit(f"make_video: cannot write {path}")
    for img in frames(n):
        out.write(img)
    out.release()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path")
    ap.add_argument("--frames", type=int, default=150)
    a = ap.parse_args()
    write(a.path, a.frames)
