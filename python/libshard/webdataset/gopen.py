"""webdataset.gopen as libshard writes it: one call, gopen(url, mode), opens a path,
file://, pipe:COMMAND or a remote URL as a binary stream.

Reading http://, https://, gs://, s3:// and hf:// goes through libshard's sources
(libshard._libshard.RawStream): the remote's retries, resumes, credentials from the
environment (GOOGLE_APPLICATION_CREDENTIALS, AWS_*), its cache (LIBSHARD_CACHE_DIR) and
connection reuse, instead of WebDataset's curl or gsutil processes. Writing http(s) uses
curl (PUT) as WebDataset does; gs:// with gsutil where it is installed; ais://, sftp://,
ftps:// and scp:// run the tools WebDataset runs; hf:// is read only (the Hub's token from
HF_TOKEN or its token file, the revision as named; gopen_hf is WebDataset's curl opener), and
so are the Hub's https:// resolve URLs and `pipe:curl -s -L RESOLVE-URL [-H
'Authorization:Bearer TOKEN']` as the Hub's guide writes them (any other pipe runs as
written). gopen_schemes maps a scheme to its opener and may be changed, as WebDataset's."""
import io
import os
import re
import shlex
import sys
from subprocess import PIPE, Popen
from urllib.parse import unquote, urlparse
from urllib.request import url2pathname

from . import utils
from ..redact import shown

#: what a pipe's exit message adds (WebDataset's module-level dict)
info = {}


class Pipe:
    """A command's standard output (mode "rb") or input (mode "wb") as a stream; its exit
    status is checked when it ends (an IOError unless 0 or in ignore_status)."""

    def __init__(self, *args, mode=None, timeout=7200.0, ignore_errors=False, ignore_status=(),
                 **kw):
        self.ignore_errors = ignore_errors
        self.ignore_status = [0, *ignore_status]
        self.timeout = timeout
        self.args = (args, kw)
        if mode[0] == "r":
            self.proc = Popen(*args, stdout=PIPE, **kw)
            self.stream = self.proc.stdout
        elif mode[0] == "w":
            self.proc = Popen(*args, stdin=PIPE, **kw)
            self.stream = self.proc.stdin
        else:
            raise ValueError(f"{mode}: unknown mode")
        if self.stream is None:
            raise ValueError(f"{shown(str(args))}: couldn't open")
        self.status = None

    def __str__(self):
        return f"<Pipe {shown(str(self.args))}>"

    def check_status(self):
        """Raises when the command has ended with a status it should not have."""
        if self.proc.poll() is not None:
            self.wait_for_child()

    def wait_for_child(self):
        """Waits for the command; IOError naming it when its status is not accepted."""
        if self.status is not None:
            return
        self.status = self.proc.wait()
        if int(os.environ.get("GOPEN_VERBOSE", 0)):
            print(f"pipe exit [{self.status} {os.getpid()}:{self.proc.pid}] {shown(str(self.args))} {info}",
                  file=sys.stderr)
        if self.status not in self.ignore_status and not self.ignore_errors:
            raise IOError(f"{shown(str(self.args))}: exit {self.status} (read) {info}")

    def read(self, *args, **kw):
        """The command's output, as its stream's read."""
        result = self.stream.read(*args, **kw)
        self.check_status()
        return result

    def write(self, *args, **kw):
        """Into the command's input."""
        result = self.stream.write(*args, **kw)
        self.check_status()
        return result

    def readLine(self, *args, **kw):  # noqa: N802 (WebDataset's name)
        """One line of the command's output."""
        result = self.stream.readline(*args, **kw)
        self.check_status()
        return result

    readline = readLine

    def close(self):
        """Closes the stream and waits for the command, checking its status."""
        if not self.stream.closed:
            self.stream.close()
            self.proc.wait(self.timeout)
            self.wait_for_child()

    def __enter__(self):
        return self

    def __exit__(self, etype, value, traceback):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


def set_options(obj, timeout=None, ignore_errors=None, ignore_status=None, handler=None):
    """Sets a Pipe's options; False for anything else."""
    if not isinstance(obj, Pipe):
        return False
    if timeout is not None:
        obj.timeout = timeout
    if ignore_errors is not None:
        obj.ignore_errors = ignore_errors
    if ignore_status is not None:
        obj.ignore_status = ignore_status
    if handler is not None:
        obj.handler = handler
    return True


class _Raw(io.RawIOBase):
    """libshard's RawStream as an io.RawIOBase (BufferedReader's source)."""

    def __init__(self, stream):
        super().__init__()
        self.raw = stream

    def readable(self):
        return True

    def readinto(self, b):
        return self.raw.readinto(b)

    def close(self):
        if not self.closed:
            self.raw.close()
        super().close()

    @property
    def name(self):
        return self.raw.url


def unread_rawstream(fileobj):
    """The RawStream under a stream gopen_libshard opened, when nothing was read from it
    (nor buffered ahead: a peek reads); None for any other object."""
    if type(fileobj) is not io.BufferedReader or type(fileobj.raw) is not _Raw:
        return None
    raw = fileobj.raw.raw
    return raw if not raw.closed and raw.tell() == 0 else None


def gopen_libshard(url, mode="rb", bufsize=8192, **settings):
    """A remote object (http, https, gs, s3) read through libshard's sources; settings:
    libshard's remote settings (retries, timeout, cache_dir, ...)."""
    if mode[0] != "r":
        raise ValueError(f"{shown(url)}: libshard reads {urlparse(url).scheme}:// URLs; write shards "
                         f"into a bucket with libshard.ShardWriter")
    from .._libshard import RawStream
    return io.BufferedReader(_Raw(RawStream(url, **settings)), buffer_size=max(bufsize, 1 << 16))


def gopen_file(url, mode="rb", bufsize=8192):
    """A local file (a path or a file:// URL)."""
    if url.startswith("file:"):
        url = re.sub("^file://?", "", url)
    return open(url, mode)


def gopen_pipe(url, mode="rb", bufsize=8192, **kw):
    """pipe:COMMAND, through the shell: its output to read, or its input to write. A plain
    `curl` of a file of the Hub (as the Hub's guide writes it) is read as that hf:// file."""
    assert url.startswith("pipe:")
    if utils.enforce_security:
        raise ValueError("gopen_pipe: unsafe_gopen is False, cannot open pipe URLs")
    if mode[0] not in "rw":
        raise ValueError(f"{mode}: unknown mode")
    hub = _hub_curl(url[5:]) if mode[0] == "r" else None
    if hub:
        return gopen_libshard(hub, mode, bufsize, **kw)
    return Pipe(url[5:], mode=mode, shell=True, bufsize=bufsize, ignore_status=[141])


# curl's options that change nothing of what a plain read of the Hub gives (libshard
# retries, follows the redirect and fails on an HTTP error anyway); with any other, the
# command runs as written.
_CURL_SWITCHES = re.compile(r"-[sSLf]+|--(silent|show-error|location|fail|retry-connrefused)")
_CURL_VALUED = {"--retry", "--retry-delay", "--retry-max-time", "--connect-timeout", "-m",
                "--max-time"}


def _hub_token():
    """The token libshard sends to the Hub (HF_TOKEN, else the Hub's token file), or None."""
    t = os.environ.get("HF_TOKEN")
    if t:
        return t
    home = os.environ.get("HF_HOME") or os.path.join(os.path.expanduser("~"), ".cache",
                                                     "huggingface")
    path = os.environ.get("HF_TOKEN_PATH") or os.path.join(home, "token")
    try:
        with open(path) as f:
            return f.read().strip() or None
    except OSError:
        return None


def _hub_url(url):
    """hf://datasets/OWNER/NAME@REV/PATH for a resolve URL of the endpoint libshard reads the
    Hub at (HF_ENDPOINT, else huggingface.co or hf.co), else None."""
    end = os.environ.get("HF_ENDPOINT", "").rstrip("/")
    bases = [end] if end else ["https://huggingface.co", "https://hf.co"]
    for base in bases:
        m = re.fullmatch(re.escape(base) + r"/datasets/([^/?#]+)/([^/?#]+)/resolve/([^/?#]+)/"
                         r"([^?#]+)(\?download=true)?", url)
        if m:
            rev, path = unquote(m[3]), unquote(m[4])
            return None if "/" in rev else f"hf://datasets/{m[1]}/{m[2]}@{rev}/{path}"
    return None


def _hub_curl(command):
    """The hf:// file a command reads when it is `curl [plain options] RESOLVE-URL` with at
    most the token libshard would send as its header; None for any other command."""
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    if not words or os.path.basename(words[0]) != "curl":
        return None
    url, i = None, 1
    while i < len(words):
        w = words[i]
        if w in ("-H", "--header") and i + 1 < len(words):
            m = re.fullmatch(r"\s*Authorization:\s*Bearer\s+(\S+)\s*", words[i + 1], re.I)
            given = m and (os.environ.get("HF_TOKEN") if m[1] in ("$HF_TOKEN", "${HF_TOKEN}")
                           else m[1])
            if not given or given != _hub_token():
                return None
            i += 2
        elif w in _CURL_VALUED and i + 1 < len(words) and re.fullmatch(r"[0-9.]+", words[i + 1]):
            i += 2
        elif _CURL_SWITCHES.fullmatch(w):
            i += 1
        elif w.startswith("-") or url:
            return None
        else:
            url, i = w, i + 1
    return _hub_url(url) if url else None


def _tool(mode, bufsize, read, write=None, what=""):
    if mode[0] == "r":
        return Pipe(read, mode=mode, bufsize=bufsize, ignore_status=[141, 23])
    if mode[0] == "w" and write:
        return Pipe(write, mode=mode, bufsize=bufsize, ignore_status=[141, 26])
    if mode[0] == "w":
        raise ValueError(f"{mode}: cannot write {what}")
    raise ValueError(f"{mode}: unknown mode")


def gopen_curl(url, mode="rb", bufsize=8192):
    """A URL through curl: read with retries, written with PUT."""
    return _tool(mode, bufsize, ["curl", "--connect-timeout", "30", "--retry", "30",
                                 "--retry-delay", "2", "-f", "-s", "-L", url],
                 ["curl", "-f", "-s", "-X", "PUT", "-L", "-T", "-", url])


def gopen_htgs(url, mode="rb", bufsize=8192):
    """htgs:// read as gs:// through curl."""
    return _tool(mode, bufsize, ["curl", "-s", "-L", re.sub("(?i)^htgs://", "gs://", url)],
                 what="htgs://")


def gopen_hf(url, mode="rb", bufsize=8192):
    """hf:// (a Hugging Face Hub file) through curl with the Hub's token."""
    from huggingface_hub import HfFileSystem, get_token, hf_hub_url
    if mode[0] != "r":
        return _tool(mode, bufsize, None, what="hf://")
    p = HfFileSystem().resolve_path(url)
    http = hf_hub_url(repo_id=p.repo_id, filename=p.path_in_repo, repo_type=p.repo_type,
                      revision=p.revision)
    return _tool(mode, bufsize, ["curl", "--connect-timeout", "30", "--retry", "30",
                                 "--retry-delay", "2", "-f", "-s", "-L", "-H",
                                 f"Authorization:Bearer {get_token()}", http])


def gopen_gsutil(url, mode="rb", bufsize=8192):
    """gs:// through gsutil (cat to read, cp to write)."""
    return _tool(mode, bufsize, ["gsutil", "cat", url], ["gsutil", "cp", "-", url])


def gopen_ais(url, mode="rb", bufsize=8192):
    """ais:// through the ais tool."""
    return _tool(mode, bufsize, ["ais", "get", url, "-"], ["ais", "put", "-", url])


def gopen_error(url, *args, **kw):
    """The opener of a scheme nothing handles."""
    raise ValueError(f"{shown(url)}: no gopen handler defined")


def _remote(url, mode="rb", bufsize=8192, **kw):
    """http(s):// read through libshard (a file of the Hub as hf://: with its token, resolved
    once), written with curl."""
    if mode[0] == "w":
        return gopen_curl(url, mode, bufsize)
    return gopen_libshard(_hub_url(url) or url, mode, bufsize, **kw)


def _hf(url, mode="rb", bufsize=8192, **kw):
    """hf:// read through libshard (the Hub's resolve URL, its redirect followed); no writes."""
    if mode[0] == "w":
        raise ValueError(f"{shown(url)}: the Hugging Face Hub is read only here: write the "
                         f"shards locally and upload them with the Hub's own tools")
    return gopen_libshard(url, mode, bufsize, **kw)


def _gs(url, mode="rb", bufsize=8192, **kw):
    """gs:// read through libshard, written with gsutil."""
    if mode[0] == "w":
        return gopen_gsutil(url, mode, bufsize)
    return gopen_libshard(url, mode, bufsize, **kw)


#: scheme -> opener(url, mode, bufsize, **kw)
gopen_schemes = dict(__default__=gopen_error, pipe=gopen_pipe, http=_remote, https=_remote,
                     gs=_gs, s3=gopen_libshard, ais=gopen_ais, sftp=gopen_curl,
                     ftps=gopen_curl, scp=gopen_curl, htgs=gopen_htgs, hf=_hf)
if "USE_AIS_FOR" in os.environ:
    for _scheme in os.environ["USE_AIS_FOR"].split(":"):
        gopen_schemes[_scheme] = gopen_ais


def rewrite_url(url):
    """url rewritten by $GOPEN_REWRITE ("prefix=replacement;..."), the first prefix that
    matches; url itself when none does."""
    rules = os.environ.get("GOPEN_REWRITE")
    if rules is None:
        return url
    if utils.enforce_security:
        raise ValueError("rewrite_url: unsafe_gopen is False, cannot rewrite URLs using "
                         "environment variables")
    for rule in rules.split(";"):
        prefix, replacement = rule.split("=", 1)
        new = re.sub("^" + prefix, replacement, url)
        if new != url:
            if int(os.environ.get("GOPEN_VERBOSE", 0)):
                print(f"GOPEN REWRITE {shown(url)} -> {shown(new)}")
            return new
    return url


def gopen(url, mode="rb", bufsize=8192, **kw):
    """url opened as a binary stream for reading ("rb") or writing ("wb"): "-" is standard
    input or output, a path or file:// a local file, other schemes go to gopen_schemes."""
    if int(os.environ.get("GOPEN_VERBOSE", 0)):
        print("GOPEN", shown(url), info, file=sys.stderr)
    if mode not in ("rb", "wb"):
        raise ValueError(f"gopen: mode 'rb' or 'wb', not {mode!r}")
    if url == "-":
        return sys.stdin.buffer if mode == "rb" else sys.stdout.buffer
    url = rewrite_url(url)
    parsed = urlparse(url)
    if parsed.scheme in ("", "file"):
        if utils.enforce_security:
            raise ValueError("gopen: unsafe_gopen is False, cannot open local files")
        buffering = int(os.environ.get("GOPEN_BUFFER", -1))
        path = url if parsed.scheme == "" else url2pathname(parsed.path)
        return open(path, mode, buffering=buffering)
    opener = gopen_schemes.get(parsed.scheme, gopen_schemes["__default__"])
    return opener(url, mode, bufsize, **kw)


def reader(url, **kw):
    """gopen(url, "rb")."""
    return gopen(url, "rb", **kw)
