"""Regenerate (or check) the committed ``*_pb2.py`` / ``*_pb2.pyi`` modules of taskhub_wire.

    python -m taskhub_wire.generate            # rewrite the modules next to the .proto files
    python -m taskhub_wire.generate --check    # exit 1 and list the files that are stale

Protos are compiled with the repository root as include path, so a proto at
``taskhub_wire/dapr/taskhub.proto`` becomes the module ``taskhub_wire.dapr.taskhub_pb2``.
No ``*_pb2_grpc.py`` is generated: the services are called and served on the upstream
(unpackaged) method paths through ``taskhub_wire.rpc``, not through generated stubs.
The generated code depends on the grpcio-tools version, so regenerate after upgrading it.
"""

from __future__ import annotations

import argparse
import filecmp
import importlib.resources
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent

# Repository-relative paths of the protos we own, one per dialect.
PROTOS: tuple[str, ...] = (
    "taskhub_wire/dapr/taskhub.proto",
    "taskhub_wire/daprrt/workflow.proto",
)

_SUFFIXES = ("_pb2.py", "_pb2.pyi")


def generated_files(protos: Sequence[str] = PROTOS) -> list[str]:
    """Repository-relative paths of every module the generator writes."""
    return [proto.removesuffix(".proto") + suffix for proto in protos for suffix in _SUFFIXES]


def _well_known_include() -> str:
    # grpc_tools ships google/protobuf/*.proto; the system protoc may have none or other versions.
    return str(importlib.resources.files("grpc_tools") / "_proto")


def generate(out_dir: Path, *, root: Path = REPO_ROOT, protos: Sequence[str] = PROTOS) -> None:
    """Compile ``protos`` (relative to ``root``) into ``out_dir``, mirroring their folders."""
    from grpc_tools import protoc  # imported here: only needed when generating

    out_dir.mkdir(parents=True, exist_ok=True)
    args = [
        "grpc_tools.protoc",
        f"-I{root}",
        f"-I{_well_known_include()}",
        f"--python_out={out_dir}",
        f"--pyi_out={out_dir}",
        *protos,
    ]
    code = protoc.main(args)
    if code != 0:
        raise RuntimeError(f"protoc failed (exit {code}) for {', '.join(protos)}; see its messages above")


def stale_files(*, root: Path = REPO_ROOT, protos: Sequence[str] = PROTOS) -> list[str]:
    """Generate into a temporary folder and return the committed files that differ or are missing."""
    with tempfile.TemporaryDirectory(prefix="taskhub-wire-gen-") as tmp:
        generate(Path(tmp), root=root, protos=protos)
        stale = []
        for rel in generated_files(protos):
            fresh, committed = Path(tmp) / rel, root / rel
            if not committed.is_file() or not filecmp.cmp(fresh, committed, shallow=False):
                stale.append(rel)
        return stale


def write(*, root: Path = REPO_ROOT, protos: Sequence[str] = PROTOS) -> list[str]:
    """Regenerate the committed modules in place; return the paths written."""
    with tempfile.TemporaryDirectory(prefix="taskhub-wire-gen-") as tmp:
        generate(Path(tmp), root=root, protos=protos)
        written = []
        for rel in generated_files(protos):
            shutil.copyfile(Path(tmp) / rel, root / rel)
            written.append(rel)
        return written


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m taskhub_wire.generate", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="do not write; exit 1 if a committed module is stale")
    options = parser.parse_args(argv)

    if options.check:
        stale = stale_files()
        if stale:
            listing = "".join(f"  {rel}\n" for rel in stale)
            sys.stderr.write(
                "generated protobuf modules are out of date with their .proto files:\n"
                f"{listing}run: python -m taskhub_wire.generate  (and commit the result)\n"
            )
            return 1
        sys.stdout.write(f"generated modules are current ({len(generated_files())} files)\n")
        return 0

    for rel in write():
        sys.stdout.write(f"wrote {rel}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
