"""Whether an output folder can be written, said in one line before a run writes anything.

A store can refuse a run's first write in many ways: no credentials, wrong ones, an endpoint that does
not answer, no such bucket, a read-only folder. Each backend raises its own type (botocore's
NoCredentialsError and EndpointConnectionError are no OSError), so the first write into an output
folder (the run's lock or lease, and `ylink validate`'s probe) is one boundary where every failure
becomes an OutputError naming the folder and the fix."""
from __future__ import annotations

import os
import tempfile
import uuid
from typing import Any

from ylink_data.core.errors import OutputError, YlinkError
from ylink_data.core.file_errors import not_a_folder, unreachable
from ylink_data.core.storage import WRITE_PROBE, filesystem, is_local, join, output_error
from ylink_data.io.readers.base import describe_error

FIX = ("check the credentials (storage: or the environment), the endpoint and that the bucket exists, "
       "or choose another output.path")


def unwritable(exc: BaseException, folder: str) -> OutputError:
    """The one line for any failure of a first write into `folder`."""
    network = unreachable(exc, folder)  # a host that does not resolve or answer: the network's to fix
    if network is not None:
        return OutputError(f"{folder} cannot be written: {network}")
    if isinstance(exc, (NotADirectoryError, FileExistsError)) and not_a_folder(folder):  # a file where a folder must be
        return OutputError(f"{not_a_folder(folder)}; choose another output.path")
    if isinstance(exc, PermissionError) and "://" in folder:  # a store's 403: whose key it was matters
        return OutputError(f"{folder} is not writable ({describe_error(exc)}); {FIX}")
    known = output_error(exc, folder)  # read-only, not ours, full: their own fixes
    if known is not None:
        return known
    if isinstance(exc, FileNotFoundError):
        return OutputError(f"{folder} cannot be written: it or its bucket does not exist "
                           f"({describe_error(exc)}); create the bucket, or choose another output.path")
    return OutputError(f"{folder} cannot be written ({describe_error(exc)}); {FIX}")


def check_writable(url: str, storage_options: dict[str, Any]) -> None:
    """Write a small object into `url` and delete it again (OutputError if that fails). A local
    folder that does not exist yet is probed in its nearest existing parent, which is where the run
    would create it: nothing is left behind, not even a folder."""
    try:
        fs, root = filesystem(url, storage_options)
        if is_local(fs):
            parent = os.path.abspath(root)
            while not os.path.exists(parent) and os.path.dirname(parent) != parent:
                parent = os.path.dirname(parent)  # a file on the way is NotADirectoryError below
            with tempfile.NamedTemporaryFile(dir=parent, prefix=f".{WRITE_PROBE}"):
                pass
        else:
            probe = join(root, f"_{WRITE_PROBE}{uuid.uuid4().hex}")
            fs.pipe_file(probe, b"")
            fs.rm_file(probe)
    except YlinkError:
        raise
    except Exception as exc:  # every backend's way of refusing: one line (see the module docstring)
        raise unwritable(exc, url) from None
