"""Planner options (``--option KEY=VALUE``): which names exist, and catching the ones no
planner reads, so that a typo is an error rather than a silently ignored setting."""

from __future__ import annotations


from npusim.errors import PlanningError, did_you_mean


class TrackedOptions(dict):
    """Planner options that remember which keys the stages looked up (present or not), so
    that a key no stage reads -- a typo such as ``time_limt`` -- is reported, not ignored."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.looked_up: set = set()

    def get(self, key, default=None):
        self.looked_up.add(key)
        return super().get(key, default)

    def __getitem__(self, key):
        self.looked_up.add(key)
        return super().__getitem__(key)

    def __contains__(self, key) -> bool:
        self.looked_up.add(key)
        return super().__contains__(key)

    def setdefault(self, key, default=None):
        self.looked_up.add(key)
        return super().setdefault(key, default)

    def pop(self, key, *default):
        self.looked_up.add(key)
        return super().pop(key, *default)


#: every option a built-in planner reads (``tests/test_determinism.py`` runs every planner
#: and checks that none reads a name missing here). A name outside this set that no stage of
#: the pipeline read is a typo (``time_limt``) and refused; a known name the pipeline does
#: not read (``time_limit`` for a heuristic) is accepted, so that one set of options can go
#: to every pipeline of a sweep or an experiment.
KNOWN_OPTIONS = frozenset({
    "deterministic", "double_buffer", "early_updates", "edges", "fallback", "joint_max_ops", "max_cells",
    "max_constraints", "max_ilp_nodes", "max_ops", "max_region", "max_states", "max_tiles", "max_variables",
    "overlap", "params", "part_ops", "parts", "preplace", "refine", "safety", "seed", "stream_capacity",
    "prefetch_depth", "taa_sort", "tile_all", "tile_objective", "time_limit", "wall_guard", "window_states", "workers",
})


def check_options_used(options: TrackedOptions, given: dict, pipeline: str) -> None:
    """Raise PlanningError for an option of ``given`` that no stage of ``pipeline`` read and
    no built-in planner knows (a plugin's own options count as known once it reads them)."""
    unknown = sorted(key for key in given if key not in options.looked_up and key not in KNOWN_OPTIONS)
    if unknown:
        candidates = sorted(KNOWN_OPTIONS | {k for k in options.looked_up if isinstance(k, str)})
        said = ", ".join(f"{key!r}{did_you_mean(key, candidates)}" for key in unknown)
        read = sorted(k for k in options.looked_up if isinstance(k, str) and not k.endswith("_stats"))
        raise PlanningError(f"pipeline {pipeline!r}: unknown planner option {said}; the options its stages read "
                            f"are {', '.join(read) or 'none'}")
