#!/usr/bin/python3
"""Makes a small ImageFolder of synthetic JPEGs (and a few PNGs), deterministically:
OUT/class_K/img_NNNN.jpg. Each class has its own background hue (varied a little from image
to image) under random ellipses, so a model can learn the classes in a few steps. For
demos and tests; benchmarks use real photographs."""
import argparse
import os
import random

from PIL import Image, ImageDraw


#: each class's background colour, far apart
PALETTE = [(200, 40, 40), (40, 170, 60), (50, 70, 210), (220, 200, 40), (160, 50, 190),
           (40, 190, 190), (230, 130, 30), (120, 120, 120)]


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("out")
    ap.add_argument("--classes", type=int, default=4)
    ap.add_argument("--per-class", type=int, default=50)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    for c in range(a.classes):
        d = os.path.join(a.out, f"class_{c}")
        os.makedirs(d, exist_ok=True)
        for i in range(a.per_class):
            r = random.Random(a.seed * 1_000_003 + c * 10_007 + i)
            w, h = r.choice([(160, 120), (120, 160), (200, 150), (128, 128)])
            hue = PALETTE[c % len(PALETTE)]
            img = Image.new("RGB", (w, h), tuple(min(255, max(0, v + r.randrange(-40, 41)))
                                                 for v in hue))
            draw = ImageDraw.Draw(img)
            for _ in range(6):
                x0, y0 = r.randrange(w), r.randrange(h)
                draw.ellipse([x0, y0, x0 + r.randrange(10, 60), y0 + r.randrange(10, 60)],
                             fill=tuple(r.randrange(256) for _ in range(3)))
            if i % 10 == 9:
                img.save(os.path.join(d, f"img_{i:04d}.png"))
            else:
                img.save(os.path.join(d, f"img_{i:04d}.jpg"), quality=r.choice([75, 90, 95]))
    print(f"made {a.classes * a.per_class} images in {a.out}")


if __name__ == "__main__":
    main()
