"""Policy variables (reference_policies_variables.html): `${aws:username}` and its kin in a
policy's resources and condition values, replaced by the request's values when it is judged."""

from __future__ import annotations

import re
from collections.abc import Callable

_VARIABLE = re.compile(r"\$\{([^}]*)\}")


# A `*` or `?` that a policy variable brought into a pattern, and the same characters of the
# text it is matched against: private-use characters that no wildcard takes for its own.
LITERAL = str.maketrans({"*": "\ue000", "?": "\ue001"})


def substitute(
    text: str, lookup: Callable[[str], list[str] | None], literal: bool = False
) -> str | None:
    """`text` with its policy variables (`${aws:username}`, `${key, 'default'}`) replaced by
    the request's values; None when one has neither a value nor a default (the resource or
    value then matches nothing). `${*}`, `${?}` and `${$}` are those characters. `literal`:
    for a wildcard pattern, what the variables bring in is marked (LITERAL) so that its `*`
    and `?` match only themselves."""
    missing = False

    def one(m: re.Match[str]) -> str:
        nonlocal missing
        name, _, default = m.group(1).partition(",")
        name, default = name.strip(), default.strip()
        if name in ("*", "?", "$"):
            value = name
        else:
            found = lookup(name.lower())
            if found:
                value = found[0]
            elif len(default) >= 2 and default[0] == default[-1] == "'":
                value = default[1:-1]
            else:
                missing = True
                return ""
        return value.translate(LITERAL) if literal else value

    out = _VARIABLE.sub(one, text)
    return None if missing else out
