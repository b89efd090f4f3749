"""The attestation golden vectors (tests/wire/attestation_vectors.json) equal what daprd's own code
computes: scripts/attestation-vectors.sh builds a small Go program over durabletask-go's
backend/historysigning at the revision daprd v1.18.2 builds with, offline from the module cache
scripts/install-daprd.sh fills. Without that cache or a Go toolchain the test fails with the install
hint rather than skip, as the other engine tests do.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "attestation-vectors.sh"
VECTORS = ROOT / "tests" / "wire" / "attestation_vectors.json"


def test_daprd_code_computes_the_golden_vectors() -> None:
    run = subprocess.run([str(SCRIPT), str(VECTORS)], capture_output=True, text=True, timeout=900, check=False)
    assert run.returncode == 0, (f"scripts/attestation-vectors.sh exited {run.returncode} (3: install daprd's Go "
                                 f"module cache with scripts/install-daprd.sh):\n{run.stderr[-2000:]}")
    got = {r["name"]: r["computed"] for r in json.loads(run.stdout)["results"]}
    expected = {c["name"]: c["expected"] for c in json.loads(VECTORS.read_text(encoding="utf-8"))["vectors"]}
    assert got.keys() == expected.keys()
    differ = {name: {"daprd": got[name], "vectors": expected[name]} for name in expected if got[name] != expected[name]}
    assert not differ, f"daprd's canonical form differs from the golden vectors: {json.dumps(differ, indent=1)}"
