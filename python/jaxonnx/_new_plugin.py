"""python -m jaxonnx new-plugin NAME DIR: a standalone plugin project from the template.

The template (plugin_template/ in the jaxonnx repository, shipped inside the
package) is a working plugin called my_plugin; writing it under another name
replaces that name in file names and contents.
"""

from __future__ import annotations

import keyword
import re
import sys
from pathlib import Path

from jaxonnx._core import ConversionError

TEMPLATE_NAME = "my_plugin"
_SKIP = {"build", "__pycache__", ".pytest_cache"}


def template_dir() -> Path:
    """The template shipped in the package, or the repository's beside the source."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "plugin_template", here.parents[1] / "plugin_template"):
        if (candidate / "CMakeLists.txt").is_file():
            return candidate
    raise ConversionError("the plugin template is missing from this jaxonnx installation")


def check_name(name: str) -> None:
    if not re.fullmatch(r"[a-z][a-z0-9_]*", name) or keyword.iskeyword(name):
        raise ConversionError(
            f"plugin name {name!r} must be a lower-case Python identifier (letters, digits, "
            f"underscores; it names the package, the library and the primitives' namespace)")


def write(name: str, dest) -> list[Path]:
    """Writes the template as plugin `name` into `dest` (which must not exist or be
    empty); returns the files written."""
    check_name(name)
    dest = Path(dest)
    if dest.exists() and any(dest.iterdir()):
        raise ConversionError(f"{dest} exists and is not empty")
    src = template_dir()
    written = []
    for path in sorted(src.rglob("*")):
        rel = path.relative_to(src)
        if path.is_dir() or _SKIP & set(rel.parts) or path.suffix == ".pyc":
            continue
        out = dest / Path(*(p.replace(TEMPLATE_NAME, name) for p in rel.parts))
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(path.read_text().replace(TEMPLATE_NAME, name))
        out.chmod(path.stat().st_mode & 0o777)
        written.append(out)
    return written


def main(args) -> int:
    try:
        files = write(args.name, args.dir)
    except ConversionError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"wrote {len(files)} files to {args.dir}; next: cd {args.dir} && "
          f"pip install --no-build-isolation . && pytest")
    return 0


def register(sub) -> None:
    """Adds the new-plugin subcommand to python -m jaxonnx."""
    p = sub.add_parser("new-plugin", help="write a standalone plugin project from the template")
    p.add_argument("name", help="the plugin's name (a lower-case Python identifier)")
    p.add_argument("dir", help="the folder to create")
    p.set_defaults(run=main)
