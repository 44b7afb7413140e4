"""A griffe extension (mkdocs.yml, mkdocstrings' `extensions:`): the docstrings'
interactive examples (`>>>` lines and their `...` continuations) are shown as
code on the API page, as `pycon` blocks, instead of being read as Markdown
(where `batch["jpg"]` would be taken for a link)."""
from __future__ import annotations

import griffe


def fence(text: str) -> str:
    out: list[str] = []
    inside = False
    for line in text.split("\n"):
        stripped = line.lstrip()
        prompt = stripped.startswith(">>>") or (inside and stripped.startswith("..."))
        if prompt and not inside:
            indent = line[:len(line) - len(stripped)]
            if out and out[-1].strip():
                out.append("")
            out.append(indent + "```pycon")
            inside = True
        elif inside and not prompt:
            out.append(indent + "```")
            if line.strip():
                out.append("")
            inside = False
        out.append(line)
    if inside:
        out.append(indent + "```")
    return "\n".join(out)


class DoctestFences(griffe.Extension):
    def on_instance(self, *, node, obj, agent, **kwargs) -> None:
        if obj.docstring is not None and ">>>" in obj.docstring.value:
            obj.docstring.value = fence(obj.docstring.value)
