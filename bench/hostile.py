"""The hostile-input cases of tests/cli/test_hostile.py, measured: for each, what shardcat
says, whether anything was lost, and its peak memory and time (GNU time). Prints a Markdown
table for the README's reliability section.

    /usr/bin/python3 bench/hostile.py [--shardcat build/tools/shardcat]
"""
import argparse
import json
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "cli"))
from test_hostile import jpeg_claiming, write_tar  # noqa: E402  (the tests' builders)


def cases(d):
    """(name, command arguments after shardcat) for each case, built in folder d."""
    out = []
    big = d / "s.bin"
    with open(big, "wb") as f:
        f.truncate(4 << 30)
        f.write(b"x")
    subprocess.run(["tar", "-cSf", str(d / "sparse.tar"), "-C", str(d), "s.bin"], check=True)
    out.append(("sparse member declaring 4 GiB", ["ls", d / "sparse.tar"]))
    z = d / "z.bin"
    with open(z, "wb") as f:
        f.truncate(1280 << 20)
    subprocess.run(["sh", "-c", f"tar -cf - -C {d} z.bin | zstd -q -1 -T2 > {d}/bomb.tar.zst"],
                   check=True)
    subprocess.run(["sh", "-c", f"tar -cf - -C {d} z.bin | gzip -1 > {d}/bomb.tar.gz"], check=True)
    out.append(("zstd bomb (1.25 GiB of zeros in 40 KiB)", ["ls", d / "bomb.tar.zst"]))
    out.append(("gzip bomb (1.25 GiB of zeros)", ["ls", d / "bomb.tar.gz"]))
    write_tar(d / "jpeg.tar", [("a.jpg", jpeg_claiming(65500, 65500))])
    out.append(("JPEG declaring 65500x65500 pixels", ["verify", "--decode", d / "jpeg.tar"]))
    write_tar(d / "many.tar", [(f"k.f{i:06d}", b"") for i in range(100_001)], tarfile.USTAR_FORMAT)
    out.append(("100,001 members in one sample", ["ls", d / "many.tar"]))
    write_tar(d / "million.tar", [(f"s{i:07d}.txt", b"") for i in range(1_000_000)], tarfile.USTAR_FORMAT)
    out.append(("a million tiny samples", ["ls", d / "million.tar"]))
    write_tar(d / "long.tar", [("a.txt", b"0"), ("k." + "x" * 300_000, b"1")])
    out.append(("a 300 KB member name", ["ls", d / "long.tar"]))
    ti = tarfile.TarInfo("k.bin")
    ti.pax_headers = {"size": str(1 << 63)}
    write_tar(d / "pax.tar", [(ti, b"")])
    out.append(("pax size of 2^63", ["ls", d / "pax.tar"]))
    write_tar(d / "esc.tar", [("a\x1b]0;owned\x07.txt", b"1")])
    out.append(("terminal escape in a name", ["ls", d / "esc.tar"]))
    write_tar(d / "keys.tar", [("../../x.txt", b"1"), ("/etc/x.txt", b"2")])
    out.append(("keys ../../x and /etc/x", ["verify", d / "keys.tar"]))
    write_tar(d / "five.tar", [(f"s{i}.txt", b"1") for i in range(5)])
    (d / "low.json").write_text(json.dumps({"shardlist": [{"url": "five.tar", "nsamples": 4}]}))
    out.append(("manifest count too low", ["stream", d / "low.json", "--seed", "1"]))
    (d / "cmd.json").write_text(json.dumps({"shardlist": [{"url": "pipe:true", "nsamples": 1}]}))
    out.append(("pipe: command in a manifest", ["ls", d / "cmd.json"]))
    # several members under the member limit, over the sample limit together
    for f in ("k.a", "k.b", "k.c"):
        with open(d / f, "wb") as fh:
            fh.truncate(200 << 20)
    subprocess.run(["sh", "-c", f"cd {d} && tar -cSf three.tar k.a k.b k.c && tar -cf - k.a k.b "
                    f"k.c | zstd -q -1 -T2 > three.tar.zst && rm k.a k.b k.c"], check=True)
    out.append(("one sample of 3 x 200 MiB (sparse tar)", ["ls", d / "three.tar"]))
    out.append(("the same as .tar.zst (21 KB)", ["ls", d / "three.tar.zst"]))
    from jpegscans import many_scans
    write_tar(d / "scans.tar", [("a.jpg", many_scans(13000, 13000, 5000))])
    out.append(("13000x13000 JPEG of 5000 scans (1.4 MiB)", ["verify", "--decode", d / "scans.tar"]))
    from test_limits import png_of
    write_tar(d / "png.tar", [("a.png", png_of(13000, 13000))])
    out.append(("13000x13000 PNG", ["verify", "--decode", d / "png.tar"]))
    write_tar(d / "s.tar", [(f"s{i}.bin", bytes(1 << 20)) for i in range(1)])
    line = " ".join(f"f{i} 512 {1 << 20} s0.f{i}" for i in range(5000))
    (d / "s.idx").write_text(f"v1.2 1\n{line}\n")
    out.append(("an .idx of 5000 fields at one member's bytes", ["stream", d / "s.tar", "--seed", "1"]))
    (d / "many.json").write_text('{"shardlist": [' + ",".join(['{"url":"a","nsamples":1}'] *
                                                               ((1 << 20) + 1)) + "]}")
    out.append(("a manifest of a million and one shards", ["ls", d / "many.json"]))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardcat", default=str(REPO / "build" / "tools" / "shardcat"))
    a = ap.parse_args()
    print("| case | exit | what shardcat says | peak RSS | time |")
    print("| --- | --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory() as t:
        d = Path(t)
        for name, args in cases(d):
            cp = subprocess.run(["/usr/bin/time", "-f", "TIME %M %e", a.shardcat,
                                 *[str(x) for x in args]], capture_output=True, timeout=300)
            err = cp.stderr.decode(errors="replace").strip().splitlines()
            peak, secs = next(l for l in reversed(err) if l.startswith("TIME")).split()[1:]
            said = next((l for l in err if l.startswith("shardcat:")), "")
            said = said.replace(str(d) + "/", "").replace("shardcat: ", "")[:110]
            print(f"| {name} | {cp.returncode} | {said} | {int(peak) // 1024} MiB | {secs} s |")


if __name__ == "__main__":
    main()
