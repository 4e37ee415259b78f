"""Which colour strings a theme may hold: what Textual's Color.parse accepts, checked with
the stdlib when the theme file is read, so a bad value names its file and key instead of
stopping the app inside Textual (tests/tui/test_tui_themes.py keeps the two in step)."""

from __future__ import annotations

import re

_NUMBER = r"-?\d+\.?\d*"
_COLOUR_FORMS = re.compile(
    rf"""
    \#(?:[0-9a-fA-F]{{3}}|[0-9a-fA-F]{{4}}|[0-9a-fA-F]{{6}}|[0-9a-fA-F]{{8}})
    | rgb\(\s*{_NUMBER}\s*,\s*{_NUMBER}\s*,\s*{_NUMBER}\s*\)
    | rgba\(\s*{_NUMBER}\s*,\s*{_NUMBER}\s*,\s*{_NUMBER}\s*,\s*{_NUMBER}\s*\)
    | hsl\(\s*{_NUMBER}\s*,\s*{_NUMBER}%\s*,\s*{_NUMBER}%\s*\)
    | hsla\(\s*{_NUMBER}\s*,\s*{_NUMBER}%\s*,\s*{_NUMBER}%\s*,\s*{_NUMBER}\s*\)
    """,
    re.VERBOSE,
)

_ANSI_NAMES = "black red green yellow blue magenta cyan white".split()
# The CSS colour names, Textual's "transparent" and its ansi_* names.
COLOUR_NAMES = frozenset(
    """
    aliceblue antiquewhite aqua aquamarine azure beige bisque black blanchedalmond blue
    blueviolet brown burlywood cadetblue chartreuse chocolate coral cornflowerblue cornsilk
    crimson cyan darkblue darkcyan darkgoldenrod darkgray darkgreen darkgrey darkkhaki
    darkmagenta darkolivegreen darkorange darkorchid darkred darksalmon darkseagreen
    darkslateblue darkslategray darkslategrey darkturquoise darkviolet deeppink deepskyblue
    dimgray dimgrey dodgerblue firebrick floralwhite forestgreen fuchsia gainsboro ghostwhite
    gold goldenrod gray green greenyellow grey honeydew hotpink indianred indigo ivory khaki
    lavender lavenderblush lawngreen lemonchiffon lightblue lightcoral lightcyan
    lightgoldenrodyellow lightgray lightgreen lightgrey lightpink lightsalmon lightseagreen
    lightskyblue lightslategray lightslategrey lightsteelblue lightyellow lime limegreen linen
    magenta maroon mediumaquamarine mediumblue mediumorchid mediumpurple mediumseagreen
    mediumslateblue mediumspringgreen mediumturquoise mediumvioletred midnightblue mintcream
    mistyrose moccasin navajowhite navy oldlace olive olivedrab orange orangered orchid
    palegoldenrod palegreen paleturquoise palevioletred papayawhip peachpuff peru pink plum
    powderblue purple rebeccapurple red rosybrown royalblue saddlebrown salmon sandybrown
    seagreen seashell sienna silver skyblue slateblue slategray slategrey snow springgreen
    steelblue tan teal thistle tomato transparent turquoise violet wheat white whitesmoke
    yellow yellowgreen
    """.split()
    + [f"ansi_{name}" for name in _ANSI_NAMES]
    + [f"ansi_bright_{name}" for name in _ANSI_NAMES]
    + ["ansi_default"]
)


def is_colour(text: object) -> bool:
    return isinstance(text, str) and (text in COLOUR_NAMES or _COLOUR_FORMS.fullmatch(text) is not None)
