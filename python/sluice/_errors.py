"""The exceptions of sluice: every failure of the library is a ``sluice.Error``.

``sluice.Error`` is an ``OSError``: ``errno`` is the POSIX error the failure stands for (also for
CUDA and cuFile failures, by the table of docs/errors.md), ``filename`` the file, ``offset`` and
``length`` the byte range (``None`` when the failure concerns no range), ``op`` the operation
("open", "read", "cuMemAlloc", ...), ``domain`` where the code comes from ("os", "cuda",
"cufile", "data") and ``code`` the code in that domain. ``str()`` is the library's message, which
already names the file and range.

A failure whose errno has a builtin subclass of ``OSError`` raises a class derived from both, so
``except FileNotFoundError`` works as with ``open()``. Bad arguments raise ``ValueError`` or
``TypeError``, never ``sluice.Error``.
"""

import builtins as _builtins
import errno as _errno


class Error(OSError):
    """A failed operation of the library (an ``OSError``, see the module's docstring)."""

    def __init__(self, err, message, filename=None, *, offset=None, length=None, op="",
                 domain="os", code=0):
        super().__init__(err, message, filename)
        self.message = message
        self.offset = offset
        self.length = length
        self.op = op
        self.domain = domain
        self.code = code

    def __str__(self):
        return self.message

    def __reduce__(self):
        return (_rebuild, (type(self).__name__, self.errno, self.message, self.filename,
                           self.offset, self.length, self.op, self.domain, self.code))


class FileNotFoundError(Error, _builtins.FileNotFoundError):
    """The file does not exist (ENOENT)."""


class PermissionError(Error, _builtins.PermissionError):
    """Not allowed (EACCES, EPERM)."""


class IsADirectoryError(Error, _builtins.IsADirectoryError):
    """A folder where a file was needed (EISDIR)."""


class FileExistsError(Error, _builtins.FileExistsError):
    """The file exists (EEXIST)."""


_BY_ERRNO = {
    _errno.ENOENT: FileNotFoundError,
    _errno.EACCES: PermissionError,
    _errno.EPERM: PermissionError,
    _errno.EISDIR: IsADirectoryError,
    _errno.EEXIST: FileExistsError,
}


def class_for(err):
    """The class sluice raises for errno ``err``."""
    return _BY_ERRNO.get(err, Error)


def _rebuild(name, err, message, filename, offset, length, op, domain, code):
    cls = globals().get(name, Error)
    return cls(err, message, filename, offset=offset, length=length, op=op, domain=domain,
               code=code)
