"""What a first-call fork writes, kept and undone: the files, folders and links a child of
`first_calls` changes, each as it was before the child's first change, put back once the child is
gone.

Copied into the grading sandbox as `patchgym_fork_journal` and used by `patchgym_first_calls`;
standard library only, Python >= 3.6 syntax, POSIX.

Why (stop 55): a child refused every write, and a call that met a refusal told nothing (an honest
library answers otherwise where its write is refused). So a lie told only outside forks had only to
try a write in one -- a file under /tmp, refused there -- and the original's own child, there to
meet it, told nothing (red team rt49's C5, reward 1 on the unittest runner). Now a child writes as
the run would, and its writes never reach the run: before each one the child names the paths it
will change (`paths_written`) and waits; the parent keeps each path's state, read by itself, the
first time it is named (`Journal.keep`), then lets the child go on; when the child is gone the
parent puts every kept path back (`Journal.undo`). The children of one test run one after another
where one writes, so none sees another's writes.

What is kept, per path (its real path, links followed as the write follows them):

    absent                        -> removed again (a folder with all it holds)
    ("file", bytes, mode, times)  -> written back in place (same inode), mode and times put back
    ("dir", mode, times)          -> made again where gone
    ("link", target)              -> made again

What is still refused (the child's caller counts it as before): a file over KEEP_MAX_BYTES, or
past KEEP_TOTAL_BYTES kept in one child; a folder moved with what it holds; a FIFO, socket or
device (but the null ones, whose writes go nowhere); a path under /proc; ownership, flags and
extended attributes. A write with no audit event (below Python: a C library writing by itself) was
never refused, and is not kept either.
"""

import os
import stat
import struct

KEEP_MAX_BYTES = 32 * 1024 * 1024  # one file's bytes kept at most
KEEP_TOTAL_BYTES = 128 * 1024 * 1024  # all of one child's
_NULL_DEVICES = ("/dev/null", "/dev/zero", "/dev/full")

# What each audited event changes: (the argument positions of its paths, with their `dir_fd`
# argument's position or None), and whether the last link of the path is followed.
WRITES = "write"  # the file's bytes or its mode or times: kept as they are (links followed)
MAKES = "make"  # a path made: kept as absent (its last link not followed)
REMOVES = "remove"  # a path removed: kept as it is (not followed)
MOVES = "move"  # a rename: both paths kept as they are (not followed); a folder that holds anything refused
_EVENTS = {
    "os.mkdir": ((MAKES, 0, 2),),
    "os.rmdir": ((REMOVES, 0, 1),),
    "os.remove": ((REMOVES, 0, 1),),
    "os.rename": ((MOVES, 0, 2), (MOVES, 1, 3)),
    "os.truncate": ((WRITES, 0, None),),
    "os.chmod": ((WRITES, 0, 2),),
    "os.utime": ((WRITES, 0, 3),),
    "os.symlink": ((MAKES, 1, 2),),
    "os.link": ((MAKES, 1, 3),),
}
# Events whose work is done through the ones above, each audited in turn.
PASSING = frozenset(("shutil.copyfile", "shutil.copymode", "shutil.copystat", "shutil.copytree", "shutil.move",
                     "shutil.rmtree", "shutil.make_archive", "shutil.unpack_archive"))
DESCRIPTOR = "fd"  # a file the child holds open for writing from before the fork: kept by its descriptor's number
REFUSE = "refuse"
_KINDS = (WRITES, MAKES, REMOVES, MOVES, DESCRIPTOR)


class _Real(object):
    """The functions used here, as found at import, before any code of the repository ran (a test's
    fake of one of them must not reach the journal: `first_calls._Real`)."""

    open, read, write, close, fstat = os.open, os.read, os.write, os.close, os.fstat
    lstat, readlink, listdir, getcwd = os.lstat, os.readlink, os.listdir, os.getcwd
    unlink, rmdir, mkdir, symlink, chmod, utime = os.unlink, os.rmdir, os.mkdir, os.symlink, os.chmod, os.utime


def paths_written(event, args):
    """[(kind, absolute path)] that the audited `event` is about to change, in this process (a
    relative path is taken from the working folder or its `dir_fd`; links are not resolved here,
    `Journal.keep` does); [] where it changes no path (a descriptor's file, kept when it was
    opened); REFUSE where it cannot be kept; None where the event writes nothing."""
    try:
        if event == "open":
            if len(args) < 3:
                return None
            path, mode, flags = args[0], args[1], args[2]
            writing = isinstance(mode, str) and any(c in mode for c in "wax+") or (
                mode is None and isinstance(flags, int) and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND))
            if not writing:
                return None
            return [] if isinstance(path, int) else [(WRITES, _absolute(path, None))]
        if event == "sqlite3.connect":
            database = args[0] if args else ""
            if database in (":memory:", "", b":memory:", b""):
                return []
            if isinstance(database, bytes):
                database = os.fsdecode(database)
            if not isinstance(database, str) and hasattr(database, "__fspath__"):
                database = os.fspath(database)
            if not isinstance(database, str) or database.startswith("file:"):
                return REFUSE
            base = _absolute(database, None)
            return [(WRITES, base)] + [(MAKES, base + tail) for tail in ("-journal", "-wal", "-shm")]
        if event in PASSING:
            return []
        parts = _EVENTS.get(event)
        if parts is None:
            return None
        found = []
        for kind, position, dir_position in parts:
            path = args[position] if len(args) > position else None
            if isinstance(path, int):  # (a descriptor's file: kept when it was opened)
                continue
            dir_fd = args[dir_position] if dir_position is not None and len(args) > dir_position else None
            found.append((kind, _absolute(path, dir_fd)))
        return found
    except (OSError, TypeError, ValueError, UnicodeError):
        return REFUSE


def _absolute(path, dir_fd):
    if not isinstance(path, (str, bytes)) and hasattr(path, "__fspath__"):
        path = os.fspath(path)
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if not isinstance(path, str) or "\0" in path:
        raise ValueError(path)
    if not path.startswith("/"):
        base = _Real.readlink("/proc/self/fd/{}".format(dir_fd)) if isinstance(dir_fd, int) else _Real.getcwd()
        path = base.rstrip("/") + "/" + path
    return path


def resolved(path, follow=True, limit=40):
    """`path` (absolute) with every link on its way resolved, the last one only where `follow`;
    a part that does not exist is taken as written. None past `limit` links."""
    parts = [part for part in path.split("/") if part and part != "."]
    here, index = "/", 0
    while index < len(parts):
        part = parts[index]
        index += 1
        if part == "..":
            here = os.path.dirname(here.rstrip("/")) or "/"
            continue
        candidate = here.rstrip("/") + "/" + part
        if index == len(parts) and not follow:
            return candidate
        try:
            found = _Real.lstat(candidate)
        except OSError:
            here = candidate
            continue
        if stat.S_ISLNK(found.st_mode):
            limit -= 1
            if limit < 0:
                return None
            target = _Real.readlink(candidate)
            parts = [p for p in target.split("/") if p and p != "."] + parts[index:]
            index = 0
            if target.startswith("/"):
                here = "/"
            continue
        here = candidate
    return here


def encode(paths):
    """A request naming `paths` ([(kind, absolute path)]), resolved here, in the child (its /proc,
    its working folder), for `decode` in the parent."""
    body = b""
    for kind, path in paths:
        real = resolved(path, follow=kind == WRITES)
        if real is None:
            return None
        data = os.fsencode(real)
        body += struct.pack(">BI", _KINDS.index(kind), len(data)) + data
    return struct.pack(">I", len(body)) + body


def encode_descriptor(fd):
    """A request naming the file the child's descriptor `fd` holds open for writing, inherited from
    the parent, whose same descriptor the parent reads it through (`Journal.keep`)."""
    data = str(int(fd)).encode()
    body = struct.pack(">BI", _KINDS.index(DESCRIPTOR), len(data)) + data
    return struct.pack(">I", len(body)) + body


def decode(body):
    """[(kind, real path)] of a request's body (`encode`, less its length)."""
    found, at = [], 0
    while at < len(body):
        kind, size = struct.unpack(">BI", body[at:at + 5])
        found.append((_KINDS[kind], os.fsdecode(body[at + 5:at + 5 + size])))
        at += 5 + size
    return found


class Journal(object):
    """The parent's keeping of what its children change (`keep`, `undo`)."""

    def __init__(self):
        self.kept = {}  # real path -> its state before the first change
        self.order = []  # real paths in the order first kept
        self.size = 0
        self.folder = None  # where the inodes of files moved away or removed are kept (`_linked`)
        self.links = 0

    def __bool__(self):
        return bool(self.order)

    __nonzero__ = __bool__

    def keep(self, paths):
        """Keep the state of each of `paths` ([(kind, real path)], `decode`) not kept yet: whether
        the child may go on."""
        for kind, real in paths:
            if kind == DESCRIPTOR:
                if not self._keep_descriptor(int(real)):
                    return False
                continue
            if not real.startswith("/") or real == "/proc" or real.startswith("/proc/"):
                return False
            if real in self.kept:
                continue
            try:
                found = _Real.lstat(real)
            except FileNotFoundError:
                self._note(real, None)
                continue
            except OSError:
                return False
            mode, times = found.st_mode, (found.st_atime_ns, found.st_mtime_ns)
            if stat.S_ISCHR(mode) and real in _NULL_DEVICES:
                continue  # (writes to it go nowhere)
            if stat.S_ISREG(mode):
                if found.st_size > KEEP_MAX_BYTES or self.size + found.st_size > KEEP_TOTAL_BYTES:
                    return False
                data = self._bytes(real)
                if data is None:
                    return False
                self.size += len(data)
                # a file moved away or removed: its inode kept too, by a link (a descriptor of the run's
                # holds it; put back by name, it would hold a file no longer there: fp63's FP-E)
                link = self._linked(real) if kind in (MOVES, REMOVES) else None
                self._note(real, ("file", data, stat.S_IMODE(mode), times, link))
            elif stat.S_ISDIR(mode):
                if kind == MOVES and _Real.listdir(real):
                    return False  # (a folder moved with what it holds is not kept)
                self._note(real, ("dir", stat.S_IMODE(mode), times))
            elif stat.S_ISLNK(mode):
                self._note(real, ("link", _Real.readlink(real)))
            else:
                return False  # a FIFO, socket or device: its writes reach whoever reads it
        return True

    def _keep_descriptor(self, fd):
        """Keep the bytes of the regular file this process's `fd` holds (the child's inherited one)."""
        try:
            found = _Real.fstat(fd)
        except OSError:
            return False
        if not stat.S_ISREG(found.st_mode):
            return False
        key = ("fd", found.st_dev, found.st_ino)
        if key in self.kept:
            return True
        if found.st_size > KEEP_MAX_BYTES or self.size + found.st_size > KEEP_TOTAL_BYTES:
            return False
        chunks, at = [], 0
        try:  # (through a description of its own, for reading: the descriptor may be open for writing only, fp63's FP-O)
            reading = _Real.open("/proc/self/fd/{}".format(fd), os.O_RDONLY)
        except OSError:
            return False
        try:
            while at < found.st_size:
                chunk = os.pread(reading, min(1 << 20, found.st_size - at), at)
                if not chunk:
                    break
                chunks.append(chunk)
                at += len(chunk)
        except OSError:
            return False
        finally:
            _Real.close(reading)
        data = b"".join(chunks)
        self.size += len(data)
        self._note(key, ("fd", fd, data, (found.st_atime_ns, found.st_mtime_ns)))
        return True

    def _linked(self, real):
        """A hard link to `real` in this journal's own folder under /tmp (None where it cannot be made
        there: another file system)."""
        try:
            if self.folder is None:
                self.folder = "/tmp/.patchgym-kept-{}".format(os.getpid())
                _Real.mkdir(self.folder, 0o700)
            self.links += 1
            link = "{}/{}".format(self.folder, self.links)
            os.link(real, link)
            return link
        except OSError:
            return None

    def _note(self, real, state):
        self.kept[real] = state
        self.order.append(real)

    @staticmethod
    def _bytes(real):
        try:
            fd = _Real.open(real, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except OSError:
            return None
        chunks = []
        try:
            while True:
                chunk = _Real.read(fd, 1 << 20)
                if not chunk:
                    break
                chunks.append(chunk)
        except OSError:
            return None
        finally:
            _Real.close(fd)
        return b"".join(chunks)

    def undo(self):
        """Put every kept path back, the last kept first; what could not be put back, as
        [real path]."""
        failed = []
        for real in reversed(self.order):
            try:
                _put_back(real, self.kept[real])
            except OSError:
                failed.append(real)
        if self.folder is not None:
            try:
                _remove(self.folder, _Real.lstat(self.folder))
            except OSError:
                pass
        self.kept, self.order, self.size, self.folder, self.links = {}, [], 0, None, 0
        return failed


def _put_back(real, state):
    try:
        now = _Real.lstat(real) if not isinstance(real, tuple) else None
    except FileNotFoundError:
        now = None
    if state is None:
        if now is not None:
            _remove(real, now)
        return
    kind = state[0]
    if kind == "fd":  # (through a description of this process's own, not the descriptor's, which may append)
        _, fd, data, times = state
        own = _Real.open("/proc/self/fd/{}".format(fd), os.O_WRONLY)
        try:
            view, at = memoryview(data), 0
            while at < len(data):
                at += os.pwrite(own, view[at:], at)
            os.ftruncate(own, len(data))
        finally:
            _Real.close(own)
        _Real.utime(fd, ns=times)
    elif kind == "file":
        _, data, mode, times, link = state
        if link is not None:
            try:
                if now is not None and stat.S_ISDIR(now.st_mode):
                    _remove(real, now)
                os.rename(link, real)  # (its own inode back; its bytes written back in it below)
                now = _Real.lstat(real)
            except OSError:
                pass
        if now is not None and not stat.S_ISREG(now.st_mode):
            _remove(real, now)
        fd = _Real.open(real, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), mode)
        try:
            view = memoryview(data)
            while view:
                view = view[_Real.write(fd, view):]
        finally:
            _Real.close(fd)
        _Real.chmod(real, mode)
        _Real.utime(real, ns=times)
    elif kind == "dir":
        _, mode, times = state
        if now is not None and not stat.S_ISDIR(now.st_mode):
            _remove(real, now)
            now = None
        if now is None:
            _Real.mkdir(real, mode)
        _Real.chmod(real, mode)
        _Real.utime(real, ns=times)
    elif kind == "link":
        if now is not None:
            _remove(real, now)
        _Real.symlink(state[1], real)


def _remove(real, found):
    if stat.S_ISDIR(found.st_mode):
        for name in _Real.listdir(real):
            inner = real.rstrip("/") + "/" + name
            _remove(inner, _Real.lstat(inner))
        _Real.rmdir(real)
    else:
        _Real.unlink(real)
