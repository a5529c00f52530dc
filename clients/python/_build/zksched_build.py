"""A PEP 517 (and PEP 660) build backend for the zksched package, standard library only.

It builds a pure-Python wheel of the zksched folder (every .py file and py.typed), an sdist of
the project, and an editable wheel (a .pth file naming this folder), with the name, version,
summary and Python requirement of pyproject.toml's [project] table. Files are written in a
fixed order with a fixed time, so one source builds the same bytes.
"""

import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "zksched"
ZIP_TIME = (1980, 1, 1, 0, 0, 0)


def _project():
    """The [project] table's `key = "value"` lines of pyproject.toml."""
    with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8") as f:
        text = f.read()
    m = re.search(r"^\[project\]\s*$(.*?)(?=^\[|\Z)", text, re.M | re.S)
    if not m:
        raise RuntimeError("pyproject.toml has no [project] table")
    out = dict(re.findall(r'^([A-Za-z-]+)\s*=\s*"([^"]*)"\s*$', m.group(1), re.M))
    for key in ("name", "version"):
        if key not in out:
            raise RuntimeError("pyproject.toml's [project] has no %s" % key)
    return out


def _metadata(p):
    lines = ["Metadata-Version: 2.1", "Name: " + p["name"], "Version: " + p["version"]]
    if "description" in p:
        lines.append("Summary: " + p["description"])
    if "requires-python" in p:
        lines.append("Requires-Python: " + p["requires-python"])
    body = ""
    if "readme" in p:
        lines.append("Description-Content-Type: text/markdown")
        with open(os.path.join(ROOT, p["readme"]), encoding="utf-8") as f:
            body = f.read()
    return "\n".join(lines) + "\n\n" + body


def _sources():
    """The package's files, relative to ROOT, sorted."""
    out = []
    for dirpath, dirnames, filenames in os.walk(os.path.join(ROOT, PACKAGE)):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in sorted(filenames):
            if name.endswith(".py") or name == "py.typed":
                out.append(os.path.relpath(os.path.join(dirpath, name), ROOT).replace(os.sep, "/"))
    return out


def _dist_name(p):
    return re.sub(r"[-_.]+", "_", p["name"]).lower() + "-" + p["version"]


def _write_wheel(wheel_directory, files):
    """Write a wheel of files (archive name to bytes) with its dist-info; return its name."""
    p = _project()
    dist_info = _dist_name(p) + ".dist-info"
    files = dict(files)
    files[dist_info + "/METADATA"] = _metadata(p).encode("utf-8")
    files[dist_info + "/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: zksched_build\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    record = []
    for name, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append("%s,sha256=%s,%d" % (name, digest, len(data)))
    record.append(dist_info + "/RECORD,,")
    files[dist_info + "/RECORD"] = ("\n".join(record) + "\n").encode("utf-8")
    wheel_name = _dist_name(p) + "-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, wheel_name), "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in files.items():
            info = zipfile.ZipInfo(name, ZIP_TIME)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    return wheel_name


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    files = {}
    for rel in _sources():
        with open(os.path.join(ROOT, rel), "rb") as f:
            files[rel] = f.read()
    return _write_wheel(wheel_directory, files)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    return _write_wheel(wheel_directory, {PACKAGE + ".pth": (ROOT + "\n").encode("utf-8")})


def build_sdist(sdist_directory, config_settings=None):
    p = _project()
    base = _dist_name(p)
    names = ["pyproject.toml", "_build/zksched_build.py"] + _sources()
    if "readme" in p:
        names.append(p["readme"])
    name = base + ".tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz", format=tarfile.PAX_FORMAT) as tar:
        pkg_info = _metadata(p).encode("utf-8")
        for rel, data in [("PKG-INFO", pkg_info)] + [(n, open(os.path.join(ROOT, n), "rb").read()) for n in sorted(names)]:
            info = tarfile.TarInfo(base + "/" + rel)
            info.size, info.mode, info.mtime = len(data), 0o644, 315532800
            tar.addfile(info, io.BytesIO(data))
    return name


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []
