"""Unsafe hygiene of the Rust core, checked on the source without a Rust toolchain (so it runs
wherever the Python tests do): ``native/src/lib.rs`` denies the lints that ``cargo clippy``
enforces (``unsafe_op_in_unsafe_fn``, ``clippy::undocumented_unsafe_blocks``,
``clippy::missing_safety_doc``); every ``unsafe { .. }`` block and ``unsafe impl`` has a
``// SAFETY:`` comment in the three lines above it (attributes skipped; a longer comment counts
when it ends there); and every ``unsafe fn`` has a ``# Safety`` section in its doc comment.
Offences are reported as ``file:line``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.once  # kernel-independent: CI runs it in its first run only

ROOT = Path(__file__).resolve().parent.parent
NATIVE_SRC = ROOT / "native" / "src"

REQUIRED_LINTS = {"unsafe_op_in_unsafe_fn", "clippy::undocumented_unsafe_blocks", "clippy::missing_safety_doc"}
LOOKBACK = 3  # code lines above an unsafe block or impl in which its SAFETY comment may start

_UNSAFE_BLOCK = re.compile(r"\bunsafe\s*\{")
_UNSAFE_IMPL = re.compile(r"\bunsafe\s+impl\b")
_UNSAFE_FN = re.compile(r"\bunsafe\s+(?:extern\s+(?:\S+\s+)?)?fn\s+[A-Za-z_]\w*")
_SAFETY_COMMENT = re.compile(r"//\s*SAFETY:")
_SAFETY_SECTION = re.compile(r"^\s*///\s*#\s*Safety\b")
_LINT_ATTR = re.compile(r"#!\[\s*(?:deny|forbid)\s*\(([^)]*)\)\s*\]")


def code_only(text: str) -> str:
    """``text`` with comments, string and character literals blanked out (newlines kept), so
    that only real code is searched for ``unsafe``."""
    out = list(text)
    i, n = 0, len(text)

    def blank(a: int, b: int) -> None:
        for k in range(a, min(b, n)):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            blank(i, j)
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            blank(i, j)
            i = j
        elif (m := re.match(r'b?r(#*)"', text[i:i + 260])) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            close = '"' + m.group(1)
            j = text.find(close, i + m.end())
            j = n if j < 0 else j + len(close)
            blank(i, j)
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            blank(i, j + 1)
            i = j + 1
        elif c == "'":
            # a character literal ('x', '\n', '\u{..}'), not a lifetime ('a)
            if i + 1 < n and text[i + 1] == "\\":
                j = text.find("'", i + 2)
                j = n if j < 0 else j
                blank(i, j + 1)
                i = j + 1
            elif i + 2 < n and text[i + 2] == "'":
                blank(i, i + 3)
                i += 3
            else:
                i += 1
        else:
            i += 1
    return "".join(out)


def _is_attribute(line: str) -> bool:
    s = line.strip()
    return s.startswith("#[") or s.startswith("#![")


def _is_comment(line: str) -> bool:
    return line.strip().startswith("//")


def has_safety_comment(lines: list[str], index: int) -> bool:
    """Whether a ``// SAFETY:`` comment precedes line ``index`` (0-based): on one of the
    ``LOOKBACK`` code lines above it (attributes not counted), or anywhere in a comment block
    that ends there."""
    k, seen = index - 1, 0
    while k >= 0 and seen < LOOKBACK:
        line = lines[k]
        if _is_attribute(line):
            k -= 1
            continue
        if _is_comment(line):
            # a comment block: its first line carries the SAFETY tag when it is a long one
            while k >= 0 and _is_comment(lines[k]):
                if _SAFETY_COMMENT.search(lines[k]):
                    return True
                k -= 1
            seen += 1
            continue
        if _SAFETY_COMMENT.search(line):  # trailing comment on a code line
            return True
        seen += 1
        k -= 1
    return False


def has_safety_section(lines: list[str], index: int) -> bool:
    """Whether the doc comment above the item on line ``index`` has a ``# Safety`` section
    (attributes and plain comments between the doc and the item are skipped)."""
    k = index - 1
    while k >= 0 and (_is_attribute(lines[k]) or (_is_comment(lines[k]) and not lines[k].strip().startswith("///"))):
        k -= 1
    while k >= 0 and lines[k].strip().startswith("///"):
        if _SAFETY_SECTION.match(lines[k]):
            return True
        k -= 1
    return False


def offences(text: str, name: str) -> list[str]:
    """Every unsafe block or impl without a SAFETY comment and every unsafe fn without a
    ``# Safety`` doc section in one Rust source, as ``name:line: what``."""
    lines = text.splitlines()
    code = code_only(text).splitlines()
    found = []
    for i, line in enumerate(code):
        for what, pattern in (("unsafe block", _UNSAFE_BLOCK), ("unsafe impl", _UNSAFE_IMPL)):
            if pattern.search(line) and not has_safety_comment(lines, i):
                found.append(f"{name}:{i + 1}: {what} without a `// SAFETY:` comment in the {LOOKBACK} lines above: "
                             f"{lines[i].strip()}")
        m = _UNSAFE_FN.search(line)
        if m and not has_safety_section(lines, i):
            found.append(f"{name}:{i + 1}: `{m.group(0)}` without a `# Safety` section in its doc comment")
    return found


def denied_lints(text: str) -> set[str]:
    """Lints a crate root denies or forbids (``#![deny(..)]``, ``#![forbid(..)]``)."""
    names: set[str] = set()
    for args in _LINT_ATTR.findall(code_only(text)):  # commented-out attributes do not count
        names.update(a.strip() for a in args.split(",") if a.strip())
    return names


def _sources() -> list[Path]:
    files = sorted(NATIVE_SRC.rglob("*.rs"))
    assert files, f"no Rust sources under {NATIVE_SRC}"
    return files


def test_lib_rs_denies_the_unsafe_lints():
    missing = REQUIRED_LINTS - denied_lints((NATIVE_SRC / "lib.rs").read_text(encoding="utf-8"))
    assert not missing, f"native/src/lib.rs must deny {sorted(missing)} at crate level (#![deny(...)])"


def test_every_unsafe_block_fn_and_impl_is_documented():
    found = []
    for path in _sources():
        found += offences(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
    assert not found, "undocumented unsafe code:\n" + "\n".join(found)


# -- the checker itself: each rule must be able to fail --------------------------------------

BAD = '''\
#[inline(always)]
unsafe fn row(p: *mut u64, s: i32, w: usize) -> *mut u64 {
    p.add(s as usize * w)
}

pub fn f(x: &mut [u64]) {
    let p = x.as_mut_ptr();
    unsafe { *row(p, 0, 1) = 1 };
}

struct P(*mut u64);
unsafe impl Send for P {}
'''

GOOD = '''\
/// A row.
///
/// # Safety
/// `p + s w` must stay inside the array.
#[inline(always)]
unsafe fn row(p: *mut u64, s: i32, w: usize) -> *mut u64 {
    // SAFETY: the caller's guarantee.
    unsafe { p.add(s as usize * w) }
}

pub fn f(x: &mut [u64]) {
    let p = x.as_mut_ptr();
    // SAFETY: a long comment whose first line carries the tag,
    // going on for a few lines,
    // and a few more,
    // before the block.
    unsafe { *row(p, 0, 1) = 1 };
    // the word "unsafe { .. }" in a comment and "unsafe { }" in a string are not code
    let _ = "unsafe { }";
    let _ = r#"unsafe impl"#;
    let _ = ('{', '"');
}

struct P(*mut u64);
// SAFETY: P is only sent with its buffer.
#[allow(dead_code)]
unsafe impl Send for P {}
'''


def test_the_checker_finds_each_kind_of_offence():
    found = offences(BAD, "bad.rs")
    assert [f.split(": ", 1)[0] for f in found] == ["bad.rs:2", "bad.rs:8", "bad.rs:12"], found
    assert "without a `# Safety` section" in found[0]
    assert "unsafe block without" in found[1] and "unsafe impl without" in found[2]
    assert offences(GOOD, "good.rs") == []


def test_the_checker_looks_only_three_lines_up():
    far = "// SAFETY: too far up\nlet a = 1;\nlet b = 2;\nlet c = 3;\nunsafe { f() };\n"
    assert offences(far, "far.rs") == ["far.rs:5: unsafe block without a `// SAFETY:` comment in the 3 lines above: "
                                       "unsafe { f() };"]
    near = "// SAFETY: near enough\nlet b = 2;\nlet c = 3;\nunsafe { f() };\n"
    assert offences(near, "near.rs") == []
    # a plain doc comment, or a SAFETY note that is not in the doc, is no `# Safety` section
    assert offences("/// Does things.\n// # Safety\nunsafe fn g() {}\n", "doc.rs")


@pytest.mark.parametrize("lib, ok", [
    ("#![deny(unsafe_op_in_unsafe_fn)]\n#![deny(clippy::undocumented_unsafe_blocks, clippy::missing_safety_doc)]\n", True),
    ("#![forbid(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]\n#![deny(clippy::missing_safety_doc)]\n", True),
    ("#![deny(unsafe_op_in_unsafe_fn)]\n", False),
    ("// #![deny(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks, clippy::missing_safety_doc)]\n", False),
    ("#![warn(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks, clippy::missing_safety_doc)]\n", False),
])
def test_the_lint_check_reads_crate_attributes(lib, ok):
    assert (REQUIRED_LINTS <= denied_lints(lib)) is ok
