"""Builds the gpupool package, generating its gRPC stubs from the API's .proto files.

Why a custom build_py: the .proto files in api/gpupool/v1 are the one contract (docs/api.md), so
the Python modules are generated from them at every build rather than committed, and cannot drift.
The system protoc (Debian's protobuf-compiler 3.21) writes the messages and their type stubs
(.pyi), and grpc_python_plugin (protobuf-compiler-grpc) the service stubs; both match Debian's
python3-protobuf and python3-grpcio, which the package runs on.

The generated modules import each other as `gpupool.v1.<name>_pb2` (the proto import paths), so
they are written under the build tree's gpupool/v1/, beside the hand-written package.

Environment overrides: GPUPOOL_PROTO_DIR (the directory holding gpupool/v1/*.proto; default
../../api relative to this file), PROTOC, GRPC_PYTHON_PLUGIN.
"""

import os
import shutil
import subprocess
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent


def _proto_root() -> Path:
    root = Path(os.environ.get("GPUPOOL_PROTO_DIR", HERE.parent.parent / "api")).resolve()
    if not list((root / "gpupool" / "v1").glob("*.proto")):
        raise SystemExit(
            f"gpupool SDK: no gpupool/v1/*.proto under {root}; build from the gpupool source "
            "tree (pip install ./sdk/python) or set GPUPOOL_PROTO_DIR to its api/ directory")
    return root


def _tool(env: str, system_path: str) -> str:
    # Debian's own first: another protoc on PATH (a newer release) writes code that Debian's
    # python3-protobuf 4.21 refuses to load.
    name = Path(system_path).name
    found = os.environ.get(env) or (system_path if Path(system_path).is_file() else None) \
        or shutil.which(name)
    if not found or not Path(found).is_file():
        raise SystemExit(f"gpupool SDK: {name} not found (install Debian's protobuf-compiler and "
                         f"protobuf-compiler-grpc, scripts/install-deps; or set {env})")
    return found


class BuildWithStubs(build_py):
    """build_py, then protoc over every API .proto into the build tree."""

    def run(self) -> None:
        super().run()
        root = _proto_root()
        protos = sorted(str(p.relative_to(root)) for p in (root / "gpupool" / "v1").glob("*.proto"))
        out = Path(self.build_lib).resolve()
        protoc = _tool("PROTOC", "/usr/bin/protoc")
        plugin = _tool("GRPC_PYTHON_PLUGIN", "/usr/bin/grpc_python_plugin")
        args = [protoc, f"-I{root}"]
        # The well-known types the API imports (google/protobuf/timestamp.proto…), from
        # libprotobuf-dev; their Python modules come with python3-protobuf, not generated here.
        if Path("/usr/include/google/protobuf/timestamp.proto").is_file():
            args.append("-I/usr/include")
        args += [
            f"--plugin=protoc-gen-grpc_python={plugin}",
            f"--python_out={out}",
            f"--pyi_out={out}",
            f"--grpc_python_out={out}",
            *protos,
        ]
        self.announce(f"generating gRPC stubs from {len(protos)} files in {root}", level=2)
        subprocess.run(args, cwd=root, check=True)


setup(
    packages=["gpupool", "gpupool.v1"],
    package_data={"gpupool": ["py.typed"]},
    cmdclass={"build_py": BuildWithStubs},
)
