"""Progressive JPEGs of many scans, written from the JPEG standard (ITU T.81, G.1.2): a grey
image of one value, a DC first scan, then `scans` full-band AC first scans whose blocks are
all end-of-band runs. Each AC scan is a few bytes and makes the decoder walk every block,
so the scan count, not the file size, sets the decode time."""
import struct


def _segment(marker, payload):
    return struct.pack(">BBH", 0xFF, marker, len(payload) + 2) + payload


class _Bits:
    def __init__(self):
        self.out, self.acc, self.n = bytearray(), 0, 0

    def put(self, value, nbits):
        for i in reversed(range(nbits)):
            self.acc = self.acc << 1 | (value >> i & 1)
            self.n += 1
            if self.n == 8:
                self.out.append(self.acc)
                if self.acc == 0xFF:
                    self.out.append(0)  # byte stuffing
                self.acc, self.n = 0, 0

    def done(self):
        while self.n:
            self.put(1, 1)  # pad with ones
        return bytes(self.out)


def many_scans(width, height, scans):
    blocks = -(-width // 8) * -(-height // 8)
    jpeg = bytearray(b"\xff\xd8")
    jpeg += _segment(0xDB, b"\x00" + bytes([1] * 64))  # quantization table 0: all ones
    jpeg += _segment(0xC2, struct.pack(">BHHB", 8, height, width, 1) + b"\x01\x11\x00")
    # DC table 0: category 0 alone (code '0'); AC table 0: EOBRUN symbols r<<4, r = 0..14,
    # each a 4-bit code (code k for r = k)
    jpeg += _segment(0xC4, b"\x00" + bytes([1] + [0] * 15) + b"\x00")
    jpeg += _segment(0xC4, b"\x10" + bytes([0, 0, 0, 15] + [0] * 12) +
                     bytes(r << 4 for r in range(15)))
    dc = _Bits()
    for _ in range(blocks):
        dc.put(0, 1)
    jpeg += _segment(0xDA, b"\x01\x01\x00\x00\x00\x00") + dc.done()
    ac, left = _Bits(), blocks
    while left:
        run = min(left, (1 << 15) - 1)
        r = run.bit_length() - 1
        ac.put(r, 4)
        ac.put(run - (1 << r), r)
        left -= run
    scan = _segment(0xDA, b"\x01\x01\x00\x01\x3f\x00") + ac.done()
    jpeg += scan * scans
    return bytes(jpeg + b"\xff\xd9")
