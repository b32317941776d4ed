"""patchgym.rl.views: versioned weight views: the trainer publishes each number format its fleet serves; samplers pull.

Owns the on-disk form of a view and both ends of it: `ViewPublisher` (encode once, write a
snapshot and a delta, move the view's `latest` pointer, prune) and `ViewReader` (pull a version by
delta or snapshot, verify every checksum, decode). Does not cover telling samplers to pull (the
loop's job), serving HTTP, or several publishers writing one root at once (one trainer publishes).

Layout, one folder per view and version (a view is a name and a `patchgym.rl.quant` format):

    ROOT/<view>/latest                    {"version": N}, replaced atomically (write + rename)
    ROOT/<view>/v<N>/model.safetensors    the encoded parts (codes and scales in storage dtypes)
    ROOT/<view>/v<N>/manifest.json        format, shapes, dtypes, per-part sha256, version, parent
    ROOT/<view>/v<N>/delta-from-v<P>.zst  XOR of every part against v<P>'s, one zstd frame a part
    ROOT/<view>/v<N>/config.json ...      files copied when given

In model.safetensors a tensor's primary part (`values` or `codes`) has the tensor's own name and
its other parts `<name>_<part>` (e.g. `...q_proj.weight_scale`), so the bf16 view is a plain Hugging
Face checkpoint. Tensors the view's selection leaves out (by default embeddings, norms, biases and
anything not 2-D) are stored in `others` (bf16 by default, or "raw": as given), as quantized
checkpoints do. Each tensor is encoded once from the published tensor; a delta is computed on the
encoded bytes, so applying it reproduces the snapshot exactly and nothing is ever re-quantized.

What a reader returns is already in the view's format: a sampler loads it as is and must not pass
it through quantize_dequantize again (that is idempotent for every format but NVFP4, whose block
scales can move on a second pass; see tests/test_quant.py).

A version folder is written under a temporary name and renamed into place, and `latest` moves only
after that, so a reader never sees half a version; views are published one after the other with
no barrier across them. Pruning renames a folder away before deleting it.

Modules: `layout.py` (names, errors, the spec of a view, manifests and pointers), `delta.py` (XOR
deltas of encoded bytes), `publisher.py`, `reader.py`.
"""

from .layout import (
    RAW,
    ViewCorrupt,
    ViewError,
    ViewMissing,
    ViewSpec,
    default_selection,
    list_versions,
    read_latest,
    read_manifest,
)
from .publisher import ViewPublisher
from .reader import PullInfo, ViewReader

__all__ = [
    "RAW",
    "PullInfo",
    "ViewCorrupt",
    "ViewError",
    "ViewMissing",
    "ViewPublisher",
    "ViewReader",
    "ViewSpec",
    "default_selection",
    "list_versions",
    "read_latest",
    "read_manifest",
]
