"""YAML for rule files, loaded within limits checked before any object is built.

A rule pack is input from whoever can write to a rule directory, and YAML can make a few
bytes expand without bound (aliases of aliases, merge keys `<<` that copy what they name)
or nest deeper than a C parser's stack. So the text is read as a stream of parser events
(libyaml's parser is a state machine, not a recursion), and a composer here builds the node
graph while it counts: nesting depth, keys per mapping, and nodes, where an alias costs the
full size of the node it names (the size it would have if expanded). Merge keys are refused
outright: a rule file has no use for them. Only a graph within every limit is handed to the
safe constructor, which builds plain YAML types only.
"""

from __future__ import annotations

from typing import Any, Optional

# PyYAML is imported when a text is first parsed, not with this module: a run whose rule pack
# and progress markers were parsed before (kept beside the bytecode) needs no YAML at all.

MAX_BYTES = 1 << 20  # one rule file; the largest bundled one is a few KB
MAX_DEPTH = 32  # nested collections (a rule file needs about 5)
MAX_NODES = 100_000  # nodes, counting each alias as the nodes it names
MAX_KEYS = 1_000  # keys in one mapping

MERGE_TAG = "tag:yaml.org,2002:merge"

_LOADER = None  # the parser; None: the one safe_loader() picks (tests set each in turn)


def safe_loader():
    """libyaml's parser when PyYAML was built with it (about 10x faster than the pure-Python
    one, which matters at start-up); both leave construction to SafeConstructor."""
    if _LOADER is not None:
        return _LOADER
    import yaml

    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class YamlLimitError(Exception):
    """The text is refused before it is built: `problem` says which limit, `line` (1-based) where."""

    def __init__(self, problem: str, line: Optional[int] = None) -> None:
        super().__init__(problem)
        self.problem = problem
        self.line = line


def _line(event) -> Optional[int]:
    mark = getattr(event, "start_mark", None)
    return None if mark is None else mark.line + 1


def read_capped(path, limit: int = MAX_BYTES) -> bytes:
    """At most `limit` bytes of a file; more is refused without reading it all."""
    with open(path, "rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise YamlLimitError(f"larger than {limit} bytes")
    return data


def load(text: str, *, max_depth: int = MAX_DEPTH, max_nodes: int = MAX_NODES, max_keys: int = MAX_KEYS,
         max_chars: int = MAX_BYTES) -> Any:
    """One YAML document as plain Python values, or None for an empty stream.

    Raises YamlLimitError when a limit is passed or a merge key or recursive alias appears,
    and yaml.YAMLError for text that is not YAML.
    """
    if len(text) > max_chars:
        raise YamlLimitError(f"larger than {max_chars} characters")
    loader = safe_loader()(text)
    try:
        node = _compose(loader, max_depth, max_nodes, max_keys)
        if node is None:
            return None
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _compose(loader, max_depth: int, max_nodes: int, max_keys: int):
    """The one document's root node, composed without recursion, every limit checked as it grows."""
    from yaml.events import (
        AliasEvent,
        DocumentEndEvent,
        DocumentStartEvent,
        MappingEndEvent,
        MappingStartEvent,
        ScalarEvent,
        SequenceEndEvent,
        SequenceStartEvent,
        StreamEndEvent,
        StreamStartEvent,
    )
    from yaml.nodes import MappingNode, ScalarNode, SequenceNode

    event = loader.get_event()
    if not isinstance(event, StreamStartEvent):  # pragma: no cover - the parser always starts so
        raise YamlLimitError("not a YAML stream")
    event = loader.get_event()
    if isinstance(event, StreamEndEvent):
        return None
    if not isinstance(event, DocumentStartEvent):  # pragma: no cover
        raise YamlLimitError("not a YAML document", _line(event))
    anchors: dict[str, tuple[Any, int]] = {}  # anchor -> (node, expanded size); size -1 while open
    # open collections: [node, anchor, expanded node count when it opened, pending key or None]
    stack: list[list] = []
    total = 0  # nodes so far, aliases counted at their full size
    root = None

    def add(node, line: Optional[int]) -> None:
        nonlocal root
        if not stack:
            root = node
            return
        top = stack[-1]
        parent = top[0]
        if isinstance(parent, SequenceNode):
            parent.value.append(node)
        elif top[3] is None:
            if isinstance(node, ScalarNode) and node.tag == MERGE_TAG:
                raise YamlLimitError("merge keys (<<) are not allowed in rule files", line)
            top[3] = node
        else:
            parent.value.append((top[3], node))
            top[3] = None
            if len(parent.value) > max_keys:
                raise YamlLimitError(f"a mapping with more than {max_keys} keys", line)

    while True:
        event = loader.get_event()
        if isinstance(event, DocumentEndEvent):
            break
        line = _line(event)
        if isinstance(event, AliasEvent):
            got = anchors.get(event.anchor)
            if got is None:
                raise YamlLimitError(f"alias *{event.anchor} names no anchor before it", line)
            node, size = got
            if size < 0:
                raise YamlLimitError(f"alias *{event.anchor} is inside the node it names (a recursive structure)", line)
            total += size
            if total > max_nodes:
                raise YamlLimitError(f"expands to more than {max_nodes} nodes (aliases counted at full size)", line)
            add(node, line)
            continue
        if isinstance(event, (SequenceEndEvent, MappingEndEvent)):
            node, anchor, opened, _ = stack.pop()
            node.end_mark = event.end_mark
            if anchor is not None:
                anchors[anchor] = (node, total - opened)
            add(node, line)
            continue
        total += 1
        if total > max_nodes:
            raise YamlLimitError(f"expands to more than {max_nodes} nodes (aliases counted at full size)", line)
        tag = event.tag
        if isinstance(event, ScalarEvent):
            if tag is None or tag == "!":
                tag = loader.resolve(ScalarNode, event.value, event.implicit)
            if tag == MERGE_TAG:
                raise YamlLimitError("merge keys (<<) are not allowed in rule files", line)
            node = ScalarNode(tag, event.value, event.start_mark, event.end_mark, style=event.style)
            if event.anchor is not None:
                anchors[event.anchor] = (node, 1)
            add(node, line)
            continue
        if len(stack) >= max_depth:
            raise YamlLimitError(f"nested deeper than {max_depth} levels", line)
        if isinstance(event, SequenceStartEvent):
            if tag is None or tag == "!":
                tag = loader.resolve(SequenceNode, None, event.implicit)
            node = SequenceNode(tag, [], event.start_mark, None, flow_style=event.flow_style)
        elif isinstance(event, MappingStartEvent):
            if tag is None or tag == "!":
                tag = loader.resolve(MappingNode, None, event.implicit)
            node = MappingNode(tag, [], event.start_mark, None, flow_style=event.flow_style)
        else:  # pragma: no cover - no other event inside a document
            raise YamlLimitError(f"unexpected {type(event).__name__}", line)
        if event.anchor is not None:
            anchors[event.anchor] = (node, -1)
        stack.append([node, event.anchor, total - 1, None])
    event = loader.get_event()
    if not isinstance(event, StreamEndEvent):
        raise YamlLimitError("more than one YAML document (a rule file holds one)", _line(event))
    return root
