"""Running one case in meshsim and in real JAX to compare what each did."""


def outcome(case, *args):
    """("ok", case(*args)), or the class name and text of the exception it raised, which
    tests compare with JAX's."""
    try:
        return "ok", case(*args)
    except Exception as e:  # noqa: BLE001 - the class name and text are compared
        return type(e).__name__, str(e)
