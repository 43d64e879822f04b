"""sluice.File for URLs: ``sluice.File("s3://bucket/key")`` (or ``http://``, ``https://``)
returns a read-only ``RemoteFile`` that reads by ranged GETs in flight (docs/remote.md); any other
path opens a local file as before. The URL check lives here so the extension's File stays as it is."""

from . import _sluice

_SCHEMES = ("http://", "https://", "s3://")


def is_remote_url(path) -> bool:
    """Whether ``path`` names a remote object (http://, https:// or s3://)."""
    return isinstance(path, str) and path.startswith(_SCHEMES)


class File(_sluice.File):
    __doc__ = _sluice.File.__doc__

    def __new__(cls, path, mode="r", *args, **kwargs):
        if is_remote_url(path):
            return _sluice.RemoteFile(path, mode)
        return super().__new__(cls)
