"""YAML text for skippr.yml: round-trip reading and writing that keeps the author's file, the
`${NAME}` value type, and checks of small YAML fragments by the engine.

Internal to the package: Config and the connector classes build on it.
"""

from __future__ import annotations

import dataclasses
import difflib
import io
import json
import re
from typing import Any, Callable, Optional

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.emitter import Emitter
from ruamel.yaml.error import CommentMark, YAMLError
from ruamel.yaml.scalarstring import ScalarString
from ruamel.yaml.tokens import CommentToken

from . import _engine

_VARIABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class EnvRef:
    """A `${NAME}` reference to an environment variable, written to skippr.yml unresolved.

    The engine replaces it with the variable's value where the pipeline runs (the shell, or `.env`
    beside skippr.yml). Secret settings (passwords, tokens, keys, connection strings) accept only
    an EnvRef, so that no secret is ever written into the file.
    """

    __slots__ = ("_name",)
    _name: str

    def __init__(self, name: str) -> None:
        if not isinstance(name, str):
            raise TypeError(f"EnvRef name must be a str, got {type(name).__name__}")
        if not _VARIABLE_NAME.fullmatch(name):
            raise ValueError(
                f"EnvRef name {name!r} is not a variable name: letters, digits and '_', not "
                "starting with a digit, for example EnvRef(\"PG_PASSWORD\")")
        object.__setattr__(self, "_name", name)

    @property
    def name(self) -> str:
        """The variable's name, without `${` and `}`."""
        return self._name

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("EnvRef is immutable")

    def __str__(self) -> str:
        return "${" + self._name + "}"

    def __repr__(self) -> str:
        return f"EnvRef({self._name!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, EnvRef) and other._name == self._name

    def __hash__(self) -> int:
        return hash(("EnvRef", self._name))


# ----- the values Python writes ------------------------------------------------------------------

def yaml_value(value: Any) -> Any:
    """`value` as plain YAML data: EnvRef becomes its `${NAME}` text, tuples become lists."""
    if isinstance(value, EnvRef):
        return str(value)
    if isinstance(value, (list, tuple)):
        return [yaml_value(item) for item in value]
    if isinstance(value, dict):
        return {key: yaml_value(item) for key, item in value.items()}
    return value


def to_node(value: Any, is_list_item: bool = False) -> Any:
    """Plain data as round-trip nodes, styled as docs/config.md writes them: lists of single
    values and mappings of single values in flow style (`key_fields: [customer_id]`,
    `rename: {a: b}`, `invoice_total: {sum: amount}`); list items that are mappings (ops,
    aggregates) and anything deeper in block style. Nodes read from a file keep their style."""
    if isinstance(value, (CommentedMap, CommentedSeq)):
        return value
    if isinstance(value, dict):
        mapping = CommentedMap((key, to_node(item)) for key, item in value.items())
        is_flow = bool(value) and not is_list_item and all(map(_is_single_value, value.values()))
        return _styled(mapping, is_flow)
    if isinstance(value, list):
        sequence = CommentedSeq(to_node(item, is_list_item=True) for item in value)
        return _styled(sequence, all(map(_is_single_value, value)))
    return value


def _styled(node: Any, is_flow: bool) -> Any:
    if is_flow:
        node.fa.set_flow_style()
    else:
        node.fa.set_block_style()
    return node


def block_mapping(values: dict[str, Any]) -> CommentedMap:
    """A mapping written one key per line (connector blocks, pipelines, transform)."""
    node = CommentedMap((key, to_node(item)) for key, item in values.items())
    node.fa.set_block_style()
    return node


def set_value(mapping: CommentedMap, key: str, value: Any) -> None:
    """mapping[key] = value. A replaced text value keeps the quotes the author used. The blank
    lines and comments that followed the old value, or the mapping's last item for a new key
    (which goes last), introduce whatever comes next: they stay after the new value."""
    if key in mapping:
        old = mapping[key]
        if isinstance(old, ScalarString) and isinstance(value, str) and not isinstance(
                value, ScalarString) and "\n" not in value:
            value = type(old)(value)
        trailing_lines = _take_trailing_lines(old)
    else:
        trailing_lines = _take_trailing_lines(mapping)
    mapping[key] = value
    if trailing_lines:
        _put_trailing_lines(mapping, key, trailing_lines)


def _last_line_path(node: Any) -> list[tuple[Any, Any]]:
    """(container, key) pairs from `node` down to the item written last in it: ruamel attaches
    the lines after a node to that item, or to the end of one of those containers."""
    path = []
    while isinstance(node, (CommentedMap, CommentedSeq)) and len(node) > 0 and (
            not node.fa.flow_style()):
        key = next(reversed(node)) if isinstance(node, CommentedMap) else len(node) - 1
        path.append((node, key))
        node = node[key]
    return path


def _comment_slot(container: Any) -> int:
    return 2 if isinstance(container, CommentedMap) else 0  # ruamel: after a value / an item


def _take_trailing_lines(node: Any) -> str:
    """Removes and returns the whole lines (blank lines, comments) after `node`'s last item,
    leaving a comment on the item's own line in place."""
    path = _last_line_path(node)
    if not path:
        return ""
    container, key = path[-1]
    slots = container.ca.items.get(key)
    slot = _comment_slot(container)
    following = ""
    if slots and slots[slot] is not None:
        token = slots[slot]
        text: str = token.value
        own_line, following = "", ""
        if text.startswith("#") and "\n" in text:  # `# comment\n` on the item's line, then more
            own_line = text[:text.index("\n") + 1]
            following = text[len(own_line):]
        elif text.startswith("\n"):  # the item's line end, then more
            following = text[1:]
        if following:
            slots[slot] = CommentToken(own_line, token.start_mark) if own_line else None
    for container, _ in reversed(path):  # comments after a block's end, innermost first
        if container.ca.end:
            following += "".join(token.value for token in container.ca.end)
            container.ca.end = []
    return following


def _put_trailing_lines(mapping: CommentedMap, key: str, lines: str) -> None:
    """Attaches whole lines after mapping[key] (after the last item inside it, if a block)."""
    container, item = ([(mapping, key)] + _last_line_path(mapping[key]))[-1]
    slots = container.ca.items.setdefault(item, [None, None, None, None])
    slot = _comment_slot(container)
    if slots[slot] is None:
        slots[slot] = CommentToken("\n" + lines, CommentMark(0))
    else:
        slots[slot] = CommentToken(slots[slot].value + lines, slots[slot].start_mark)


def _is_single_value(value: Any) -> bool:
    return not isinstance(value, (dict, list))


def plain(node: Any) -> Any:
    """Round-trip nodes as plain data that compares by content and key order."""
    if isinstance(node, dict):
        return [("map", str(key), plain(item)) for key, item in node.items()]
    if isinstance(node, list):
        return ["seq"] + [plain(item) for item in node]
    if isinstance(node, str):
        return str(node)
    return node


# ----- reading and writing the file ---------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Layout:
    """How a file is indented, so that rewritten parts look like the rest of it."""

    mapping_indent: int = 2
    sequence_dash_offset: int = 2  # `key:\n  - item`: the dash two columns in from the key
    uses_crlf: bool = False

    @staticmethod
    def of(text: Optional[str]) -> "Layout":
        """The layout of `text` (the defaults for no text, or text without nesting)."""
        if not text:
            return Layout()
        mapping_indent, dash_offset = _guess_indentation(text)
        return Layout(mapping_indent, dash_offset, "\r\n" in text)


def _guess_indentation(text: str) -> tuple[int, int]:
    """(mapping indent, dash offset): the first nested mapping key's and the first block
    sequence dash's distance from their parent's key."""
    mapping_indent: Optional[int] = None
    dash_offset: Optional[int] = None
    parent_column: Optional[int] = None  # column of the key the previous line opened a block with
    for line in text.splitlines():
        stripped = line.lstrip(" ")
        if not stripped or stripped.startswith("#"):
            continue
        indent = len(line) - len(stripped)
        is_item = stripped == "-" or stripped.startswith("- ")
        if parent_column is not None:
            if is_item and indent >= parent_column and dash_offset is None:
                dash_offset = indent - parent_column
            elif not is_item and indent > parent_column and mapping_indent is None:
                mapping_indent = indent - parent_column
        key_column = indent
        if is_item:  # `- key:` opens a block at the key, after the dash
            after_dash = stripped[1:]
            key_column += 1 + len(after_dash) - len(after_dash.lstrip(" "))
        parent_column = key_column if stripped.rstrip().endswith(":") else None
        if mapping_indent is not None and dash_offset is not None:
            break
    mapping_indent = mapping_indent or 2
    return mapping_indent, dash_offset if dash_offset is not None else min(mapping_indent, 2)


class _DoubleQuotingEmitter(Emitter):
    """Quotes new text that needs quotes with double quotes, as docs/config.md does
    (`count: "*"`); text the author quoted keeps its quotes."""

    def choose_scalar_style(self) -> Any:
        style = super().choose_scalar_style()
        if style == "'" and self.event.style != "'":
            return '"'
        return style


def _round_trip(layout: Layout) -> YAML:
    yaml = YAML(typ="rt")
    yaml.Emitter = _DoubleQuotingEmitter
    yaml.preserve_quotes = True  # type: ignore[assignment]  # ruamel declares these None
    yaml.width = 1 << 16  # type: ignore[assignment]  # never fold a long value onto two lines
    yaml.indent(mapping=layout.mapping_indent, sequence=layout.sequence_dash_offset + 2,
                offset=layout.sequence_dash_offset)
    return yaml


def parse(text: str) -> CommentedMap:
    """The document of a skippr.yml text (an empty mapping for an empty file). Raises
    ConfigError when the text is not a YAML mapping."""
    try:
        document = _round_trip(Layout()).load(text)
    except YAMLError as error:
        raise _engine.ConfigError(f"cannot read the YAML: {error}") from None
    if document is None:
        return CommentedMap()
    if not isinstance(document, CommentedMap):
        raise _engine.ConfigError("a skippr.yml holds a mapping of sections at its top level")
    return document


def dump(document: CommentedMap, layout: Layout) -> str:
    """`document` as YAML text indented like `layout` (no CRLF translation)."""
    if not document:
        return "{}\n"
    stream = io.StringIO()
    _round_trip(layout).dump(document, stream)
    return stream.getvalue()


def rewrite(original: Optional[str], document: CommentedMap) -> str:
    """The text for `document`, which was read from `original` and then changed.

    ruamel keeps comments, quotes and key order, but normalises spacing (`{ sum: amount }` becomes
    `{sum: amount}`), indentation and document markers. So the original text is merged three ways
    with ruamel's output of the unchanged document (the base) and of the changed one: every line
    the changes leave alone stays as the author wrote it. When the result does not read back as
    exactly `document` (the author's formatting next to a change confused the merge), ruamel's
    output is used as it is.
    """
    layout = Layout.of(original)
    changed = dump(document, layout)
    if not original:
        return changed
    unix_original = original.replace("\r\n", "\n")
    if _is_only_comments(unix_original):  # nothing for the merge to align with
        merged = unix_original + ("" if unix_original.endswith("\n") else "\n") + changed
        return merged.replace("\n", "\r\n") if layout.uses_crlf else merged
    base = dump(parse(unix_original), layout)
    merged = "".join(three_way_merge(base.splitlines(True), unix_original.splitlines(True),
                                     changed.splitlines(True)))
    if not _reads_as(merged, document):
        merged = changed
    return merged.replace("\n", "\r\n") if layout.uses_crlf else merged


def _is_only_comments(text: str) -> bool:
    return all(not line.strip() or line.lstrip().startswith("#") for line in text.splitlines())


def _reads_as(text: str, document: CommentedMap) -> bool:
    try:
        return bool(plain(parse(text)) == plain(document))
    except (_engine.ConfigError, YAMLError):
        return False


# ----- three-way merge of lines -------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class _Edit:
    start: int  # base lines [start, end) are replaced by `lines`
    end: int
    lines: list[str]
    is_theirs: bool


def _edits(base: list[str], other: list[str], is_theirs: bool) -> list[_Edit]:
    matcher = difflib.SequenceMatcher(None, base, other, autojunk=False)
    return [_Edit(i1, i2, other[j1:j2], is_theirs)
            for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag != "equal"]


def _conflicts(cluster: list[_Edit], edit: _Edit) -> bool:
    cluster_end = max(e.end for e in cluster)
    if edit.start < cluster_end:
        return True
    # Two insertions at one place: which goes first is unknown.
    last = cluster[-1]
    return edit.start == edit.end == last.start == last.end


def three_way_merge(base: list[str], ours: list[str], theirs: list[str]) -> list[str]:
    """Lines of `base` with the edits of both `ours` and `theirs`; where edits of both touch the
    same base lines, `theirs` wins for those lines."""
    edits = sorted(_edits(base, ours, False) + _edits(base, theirs, True),
                   key=lambda e: (e.start, e.end))
    clusters: list[list[_Edit]] = []
    for edit in edits:
        if clusters and _conflicts(clusters[-1], edit):
            clusters[-1].append(edit)
        else:
            clusters.append([edit])
    merged: list[str] = []
    position = 0
    for cluster in clusters:
        start, end = cluster[0].start, max(e.end for e in cluster)
        merged += base[position:start]
        merged += _resolve(base, cluster, start, end)
        position = end
    return merged + base[position:]


def _resolve(base: list[str], cluster: list[_Edit], start: int, end: int) -> list[str]:
    sides = {edit.is_theirs for edit in cluster}
    chosen = [edit for edit in cluster if edit.is_theirs] if sides == {True, False} else cluster
    lines: list[str] = []
    position = start
    for edit in chosen:
        lines += base[position:edit.start] + edit.lines
        position = edit.end
    return lines + base[position:end]


# ----- engine checks of fragments -----------------------------------------------------------------

PROBE_NAME = "probe"


def engine_problems(document: dict[str, Any], display_name: str, path_prefix: str) -> list[str]:
    """The engine's problems with a small document built to check one object, each relative to
    `path_prefix` (the object's key path in `document`): `format: 'xml' is not allowed; ...`."""
    text = json.dumps(yaml_value(document), ensure_ascii=False)  # JSON is YAML the engine reads
    try:
        _engine.check_config(text, display_name)
    except _engine.ConfigError as error:
        return [_relative_problem(line, display_name, path_prefix)
                for line in str(error).splitlines() if line.strip()]
    return []


def _relative_problem(line: str, display_name: str, path_prefix: str) -> str:
    place = re.match(re.escape(display_name) + r"(:\d+:\d+)?: ", line)
    problem = line[place.end():] if place else line
    for separator in (".", ": "):
        if problem.startswith(path_prefix + separator):
            problem = problem[len(path_prefix) + len(separator):]
            break
    return problem.replace(path_prefix + ".", "")


def raise_engine_problems(owner: str, problems: list[str],
                          error: Callable[[str], Exception] = ValueError) -> None:
    """Raises ValueError `<owner>: <problem>` (one line per problem) when there are problems."""
    if problems:
        raise error("\n".join(f"{owner}: {problem}" for problem in problems))
