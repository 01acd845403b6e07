"""Reading printed programs in tests: the printer writes a sub-program used more than once, or
longer than a few equations, once at the top (`let jaxpr = { ... } in`) and names it where it is
used (`jaxpr=jaxpr`), as JAX's does; tests that look inside a body read it back in place."""
import re


def inline_shared_programs(text: str) -> str:
    """`text` with each top `let NAME = { ... } in` block written where a `...jaxpr=NAME`
    parameter names it, indented under that parameter as an unshared body prints."""
    lines = str(text).splitlines()
    blocks: dict[str, list[str]] = {}
    i = 0
    while i < len(lines) and lines[i].startswith("let "):
        name, first = lines[i][len("let "):].split(" = ", 1)
        body = [first]
        while not body[-1].endswith("} in"):
            i += 1
            body.append(lines[i])
        body[-1] = body[-1][: -len(" in")]
        blocks[name] = _substitute(body, blocks)  # a block may name the ones above it
        i += 1
    return "\n".join(_substitute(lines[i:], blocks))


def _substitute(lines: list[str], blocks: dict[str, list[str]]) -> list[str]:
    out = []
    for line in lines:
        match = re.search(r"(\w*jaxpr\w*=)(\w+)\b", line)
        if match is None or match.group(2) not in blocks:
            out.append(line)
            continue
        body = blocks[match.group(2)]
        indent = " " * (len(line) - len(line.lstrip()))
        out.append(line[: match.start(2)] + body[0])
        out.extend(indent + b for b in body[1:-1])
        out.append(indent + body[-1] + line[match.end(2):])
    return out
