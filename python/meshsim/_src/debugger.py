"""`jax.debug.breakpoint()`: stops the running program where it is called and reads commands
(`p expr`, `pp expr`, `l`, `ll`, `w`, `u`, `d`, `c`, `q`) at a `(jdb)` prompt, with the
calling Python frames' local variables, traced values replaced by what they hold when the
program runs (a `debug_callback` carries them)."""
from __future__ import annotations

import cmd
import inspect
import linecache
import pprint
import sys
from typing import Any

from meshsim._src import core, tree_util


class _Frame:
    """A Python frame as the debugger shows it: file, line, source and local values."""

    def __init__(self, filename: str, lineno: int, function: str, local_values: dict, code=None):
        self.filename, self.lineno, self.function = filename, lineno, function
        self.locals, self.code = local_values, code


def _user_frames(filter_frames: bool, num_frames: int | None) -> list:
    """The caller's frames, innermost first, without meshsim's own (when filtering)."""
    frame = sys._getframe(2)
    frames = []
    while frame is not None:
        internal = "/meshsim/" in frame.f_code.co_filename.replace("\\", "/")
        if not (filter_frames and internal):
            frames.append(frame)
        frame = frame.f_back
    return frames[:num_frames] if num_frames is not None else frames


class _Captured:
    """A local variable whose array leaves are the callback's operands [start, start + n)."""

    def __init__(self, start: int, n: int, tree):
        self.start, self.n, self.tree = start, n, tree


class _Debugger(cmd.Cmd):
    prompt = "(jdb) "

    def __init__(self, frames: list[_Frame]):
        super().__init__(stdin=sys.stdin, stdout=sys.stdout)
        self.use_rawinput = False
        self.frames, self.index = frames, 0

    @property
    def frame(self) -> _Frame:
        return self.frames[self.index]

    def _eval(self, expr: str) -> Any:
        return eval(expr, {}, dict(self.frame.locals))  # noqa: S307 - the user's own expression

    def _report(self, fn, arg: str) -> None:
        try:
            fn(self._eval(arg))
        except Exception as e:  # noqa: BLE001 - shown to the user, as pdb does
            print(f"*** {type(e).__name__}: {e}", file=self.stdout)

    def default(self, line: str) -> None:
        print(f"*** Unknown command: {line}", file=self.stdout)

    def do_p(self, arg: str) -> None:
        self._report(lambda v: print(repr(v), file=self.stdout), arg)

    def do_pp(self, arg: str) -> None:
        self._report(lambda v: print(pprint.pformat(v), file=self.stdout), arg)

    def _source(self, whole_file: bool) -> None:
        """The frame's function (its whole file for module code or `ll`), its line marked."""
        f = self.frame
        lines = linecache.getlines(f.filename)
        lo, hi = 0, len(lines)
        if not whole_file and f.code is not None and f.function != "<module>":
            try:
                source, lo = inspect.getsourcelines(f.code)
                lo, hi = max(lo - 1, 0), max(lo - 1, 0) + len(source) + 1
            except (OSError, TypeError):
                lo, hi = max(f.lineno - 4, 0), f.lineno + 4
        elif not whole_file:
            lo, hi = max(f.lineno - 4, 0), min(f.lineno + 3, len(lines)) + 1
        print(f"> {f.filename}({f.lineno})", file=self.stdout)
        for i in range(lo, hi):
            text = lines[i].rstrip("\n") if i < len(lines) and i < hi - 1 else ""
            marker = "->  " if i + 1 == f.lineno else "    "
            print(marker + text, file=self.stdout)

    def do_l(self, arg: str) -> None:
        self._source(whole_file=False)

    def do_ll(self, arg: str) -> None:
        self._source(whole_file=True)

    def do_w(self, arg: str) -> None:
        print("Traceback:", file=self.stdout)
        for f in reversed(self.frames):
            print(f'  File "{f.filename}", line {f.lineno}', file=self.stdout)
            print("    " + linecache.getline(f.filename, f.lineno).strip(), file=self.stdout)

    def do_u(self, arg: str) -> None:
        if self.index + 1 >= len(self.frames):
            print("At topmost frame.", file=self.stdout)
        else:
            self.index += 1
        self._source(whole_file=False)

    def do_d(self, arg: str) -> None:
        if self.index == 0:
            print("At bottommost frame.", file=self.stdout)
        else:
            self.index -= 1
        self._source(whole_file=False)

    def do_c(self, arg: str) -> bool:
        return True

    def do_q(self, arg: str) -> None:
        raise SystemExit(0)

    # The end of the input quits, as JAX's debugger does: a program whose breakpoint finds no
    # input (stdin closed or redirected) fails there instead of running on.
    do_continue, do_cont, do_quit, do_exit, do_EOF = do_c, do_c, do_q, do_q, do_q
    do_list, do_where, do_bt, do_up, do_down = do_l, do_w, do_w, do_u, do_d


def breakpoint(*, backend: str | None = None, filter_frames: bool = True,  # noqa: A001 - JAX's name
               num_frames: int | None = None, ordered: bool = False, token=None, **kwargs):
    """Enters the `(jdb)` debugger when the program reaches this point (see the module)."""
    from meshsim._src.callback import debug_callback
    frames = _user_frames(filter_frames, num_frames)
    shown, values = [], []
    for f in frames:
        local_values = {}
        for name, value in f.f_locals.items():
            leaves, tree = tree_util.tree_flatten(value)
            if leaves and all(core.is_value(x) for x in leaves):
                local_values[name] = _Captured(len(values), len(leaves), tree)
                values.extend(leaves)
            else:
                local_values[name] = value
        shown.append((f.f_code, f.f_lineno, local_values))

    def enter(*concrete):
        resolved = []
        for code, lineno, local_values in shown:
            env = {}
            for name, v in local_values.items():
                if isinstance(v, _Captured):
                    v = tree_util.tree_unflatten(v.tree, list(concrete[v.start:v.start + v.n]))
                env[name] = v
            resolved.append(_Frame(code.co_filename, lineno, code.co_name, env, code))
        print("Entering jdb:")
        _Debugger(resolved).cmdloop()
    debug_callback(enter, *values, ordered=ordered)
    return token
