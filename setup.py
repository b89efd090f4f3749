"""Which files the wheel and the sdist carry; the project's metadata is in pyproject.toml.

The scenario library, the SDK drivers' sources and their install scripts stay top-level folders
of the repository (scenarios/, drivers/, scripts/) and ship as package data of
`conformance_library.*` (a namespace with no folder of its own), which installs next to the
`conformance` package; `conformance.library` finds them there or in a checkout.
"""

from setuptools import find_namespace_packages, setup

LIBRARY = {
    "conformance_library.scenarios": "scenarios",
    "conformance_library.drivers": "drivers",
    "conformance_library.scripts": "scripts",
}
# Named file by file: a checkout's drivers also hold node_modules/, Maven's target/ and built binaries.
DRIVER_FILES = [
    "README.md", "*/README.md", "*/target.yaml", "*/requirements.txt", "*/*.py", "sdk_envs/*.txt",
    "durabletask_js/*.js", "durabletask_js/package.json", "durabletask_js/package-lock.json",
    "durabletask_go/*.go", "durabletask_go/go.mod", "durabletask_go/go.sum",
    "durabletask_java/pom.xml", "durabletask_java/checkout-client.pom.xml", "durabletask_java/src/**/*",
]



def packages() -> list[str]:
    """Ours, and every folder of the library as a (namespace) package, so each file has one."""
    out = find_namespace_packages(include=["taskhub_wire*", "taskhub_core*", "taskhub_programs*", "fake_sidecar*", "fake_worker*", "conformance*"],
                                  exclude=["*__pycache__*"])
    for package, folder in LIBRARY.items():
        out += [package] + [f"{package}.{sub}" for sub in find_namespace_packages(
            where=folder, exclude=["*__pycache__*", "durabletask_js.node_modules*", "durabletask_java.target*"])]
    return out


setup(
    packages=packages(),
    package_dir=LIBRARY,
    package_data={
        "taskhub_wire": ["**/*.proto", "**/*.pyi"],
        "conformance": ["*.yaml", "targets/*.yaml", "enginediff/*.yaml", "mutation/*.yaml", "versions/*.yaml", "**/*.json", "drift/*.js", "drift/go/*", "drift/java/*"],
        "taskhub_programs": ["*.json", "examples/*.yaml"],
        "conformance_library.scenarios": ["**/*.yaml", "**/*.md"],
        "conformance_library.drivers": DRIVER_FILES,
        "conformance_library.scripts": ["*.sh"],
    },
    exclude_package_data={"conformance_library.drivers": ["*/__pycache__/*", "*.pyc"]},
)
