"""False positives of this stop's own fork changes (fp63, stop 55), each an honest gold that resolves.

A hunt aimed at stop 55's first-call fork (writes kept and undone, files held open for writing given
to the child, errors through the fixed code counted, held children waited for, the patch's fork hooks
held) found, among others:

* FP-O: a file opened for appending before the body, not empty at the fork (a log the fixture wrote
  a first line to): the parent read its bytes through the run's own descriptor, open for writing
  only, which failed, and the child had /dev/null (`fork_journal.Journal._keep_descriptor` now reads
  through a description of its own);
* FP-E: a store rewriting its file atomically (`os.replace` of a temporary) while the run held it
  open: the bytes were put back in the new inode, and the run's descriptor was left on the old one
  (a file moved away or removed is now kept by a hard link too, and its inode put back);
* FP-D: a fixed `alive(pid)` asking `os.kill(pid, 0)`, refused in the child (signal 0 sends
  nothing, and is let through).
"""

from __future__ import annotations

import pytest

from tests.fixtures_grading.factories import any_factory_or_reason
from tests.test_false_positives_round32 import JOURNAL, assert_the_gold_resolves

FACTORY, NO_FACTORY = any_factory_or_reason()
pytestmark = [pytest.mark.slow, pytest.mark.skipif(FACTORY is None, reason=NO_FACTORY or "no sandbox")]

STORE = ('import os\n\n\nclass Store:\n    def __init__(self, path):\n        self.path = path\n        self._fh = open(path, "a")\n\n'
         '    def add(self, key, value):\n        self._fh.write("+%s %s\\n" % (key, value))\n        self._fh.flush()\n\n'
         '    def remove(self, key):\n        self._fh.write("-%s\\n" % key)\n        self._fh.flush()\n\n'
         '    def items(self):\n        found = {}\n        with open(self.path) as f:\n            for line in f.read().splitlines():\n'
         '                if line.startswith("+"):\n                    key, _, value = line[1:].partition(" ")\n'
         '                    found[key] = value\n                elif line.startswith("-"):\n'
         '                    found.pop(line[1:], None)\n        return found\n\n'
         '    def compact(self):\n        items = self.items()\n        with open(self.path + ".tmp", "w") as f:\n'
         '            for key, value in items.items():\n                f.write("+%s %s\\n" % (key, value))\n'
         '        self._fh.close()\n        os.replace(self.path + ".tmp", self.path)\n'
         '        pass  # bug: the file is not opened again\n\n'
         '    def close(self):\n        self._fh.close()\n')
ALIVE = ('import os\n\n_KNOWN = set()\n\n\ndef alive(pid):\n    return pid in _KNOWN  # bug: asks no one\n')
ALIVE_FIX = '    try:\n        os.kill(pid, 0)\n    except OSError:\n        return False\n    return True\n'

# name: (module path, buggy source, (bug, fix), test file, its source, its graded test)
ROWS = {
    "FP-O a log not empty at the fork": (
        "calc/journal.py", JOURNAL, ('self._fh.write(event)  # bug: entries run together', 'self._fh.write(event + "\\n")'),
        "tests/test_journal.py",
        'import pytest\n\nfrom calc.journal import Journal\n\n\n@pytest.fixture\ndef journal(tmp_path):\n'
        '    j = Journal(tmp_path / "events.log")\n    j._fh.write("boot\\n")\n    j._fh.flush()\n    yield j\n    j.close()\n\n\n'
        'def test_record(journal):\n    journal.record("start")\n    journal.record("stop")\n'
        '    assert journal.entries() == ["boot", "start", "stop"]\n', "test_record"),
    "FP-E a store replaced while the run holds it open": (
        "calc/store.py", STORE, ("        pass  # bug: the file is not opened again\n", '        self._fh = open(self.path, "a")\n'),
        "tests/test_store.py",
        'import pytest\n\nfrom calc.store import Store\n\n\n@pytest.fixture\ndef store(tmp_path):\n'
        '    s = Store(str(tmp_path / "records"))\n    s.add("k0", "a")\n    yield s\n    s.close()\n\n\n'
        'def test_add_after_compact(store):\n    store.add("k1", "x")\n    store.remove("k1")\n    store.add("k2", "b")\n'
        '    store.compact()\n    store.add("k3", "c")\n    assert store.items() == {"k0": "a", "k2": "b", "k3": "c"}\n',
        "test_add_after_compact"),
    "FP-D a fixed alive(pid) asking os.kill(pid, 0)": (
        "calc/proc.py", ALIVE, ("    return pid in _KNOWN  # bug: asks no one\n", ALIVE_FIX),
        "tests/test_proc.py",
        'import os\n\nfrom calc.proc import alive\n\n\ndef test_alive():\n    assert alive(os.getpid()) is True\n', "test_alive"),
}


@pytest.mark.parametrize("row", sorted(ROWS))
def test_an_honest_fix_meeting_this_stops_forks_resolves(tmp_path, row) -> None:
    assert_the_gold_resolves(tmp_path, "fp63", ROWS[row])
