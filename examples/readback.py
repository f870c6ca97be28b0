#!/usr/bin/python3
"""Reads shards back through their manifests with Python's tarfile (and the zstd CLI for
.tar.zst) and checks them: manifest counts and checksums, every .idx entry, and, with
--images, every image against its source file. Prints one summary line per manifest."""
import argparse
import hashlib
import json
import os
import subprocess
import sys
import tarfile
import io

DIGESTS = {"md5sum": "md5", "sha256": "sha256"}


def tar_bytes(path):
    if path.endswith(".zst"):
        return subprocess.run(["zstd", "-dcq", path], check=True, stdout=subprocess.PIPE).stdout
    with open(path, "rb") as f:
        return f.read()


def index_path(shard):
    for suffix in (".tar.zst", ".tar"):
        if shard.endswith(suffix):
            return shard[: -len(suffix)] + ".idx"
    return shard + ".idx"


def check(manifest, images):
    with open(manifest) as f:
        m = json.load(f)
    base = os.path.dirname(manifest)
    classes = m.get("libshard", {}).get("classes", [])
    samples = members = 0
    checked = set()
    for entry in m["shardlist"]:
        path = os.path.join(base, entry["url"])
        raw = open(path, "rb").read()
        assert len(raw) == entry["filesize"], path
        # each digest the manifest carries (SHA-256 by default, MD5 with --checksum md5)
        for field, algo in DIGESTS.items():
            if field in entry:
                assert hashlib.new(algo, raw).hexdigest() == entry[field], (path, field)
                checked.add(algo)
        data = tar_bytes(path)
        with tarfile.open(fileobj=io.BytesIO(data)) as t:
            infos = t.getmembers()
            members += len(infos)
            for info in infos:
                body = t.extractfile(info).read()
                if info.name.endswith(".json"):
                    meta = json.loads(body)
                    if images:
                        key = info.name[: -len(".json")]
                        img = [i for i in infos if i.name.startswith(key + ".") and i.name.split(".")[-1] not in ("json", "cls")][0]
                        src = open(os.path.join(images, meta["path"]), "rb").read()
                        assert t.extractfile(img).read() == src, meta["path"]
                        if classes:
                            assert classes[meta["label"]] == meta["class"]
        with open(index_path(path)) as f:
            head, *lines = f.read().splitlines()
        assert head == f"v1.2 {entry['nsamples']}", head
        assert len(lines) == entry["nsamples"]
        for line in lines:
            tok = line.split(" ")
            for i in range(0, len(tok), 4):
                ext, off, size, name = tok[i], int(tok[i + 1]), int(tok[i + 2]), tok[i + 3]
                assert data[off - 512: off - 512 + len(name)] == name.encode(), name
        samples += entry["nsamples"]
    print(f"{manifest}: {len(m['shardlist'])} shards, {samples} samples, {members} members: "
          f"sizes, {', '.join(sorted(checked)) or 'no digests'}, index offsets{' and image bytes' if images else ''} all match")


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("manifests", nargs="+")
    ap.add_argument("--images", help="the source folder, to compare image bytes")
    a = ap.parse_args()
    for m in a.manifests:
        check(m, a.images)


if __name__ == "__main__":
    sys.exit(main())
