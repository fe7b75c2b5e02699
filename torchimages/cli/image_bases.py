"""Which bases (`--bases`) `test` and `outdated` judge a built matrix image by: those it was built on, as its
`io.torchimages.bases` label says (`bootstrap`; no label: the registry's), unless --bases or TORCHIMAGES_BASES
says otherwise. An image built with `--bases bootstrap` then needs no `--bases` to be tested or checked; a
disagreement (the option against the label, or the label against the matrix's own choice) is said in one line."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from torchimages.combination import BASES_LABEL, BOOTSTRAP, Combination, Image
from torchimages.planning import plan as planning

REGISTRY = "registry"


@dataclass(frozen=True)
class Choice:
    """The bases to judge an image by (None: the plan's as loaded) and the line that says a disagreement."""

    bases: str | None
    note: str | None = None


def built_on(labels: Mapping[str, str]) -> str:
    """The bases an image was built on, by its label: `bootstrap`, else the registry's."""
    return BOOTSTRAP if labels.get(BASES_LABEL) == BOOTSTRAP else REGISTRY


def choose(told: str | None, planned: str, labels: Mapping[str, str] | None, reference: str) -> Choice:
    """The bases to judge `reference` by: `told` (--bases, TORCHIMAGES_BASES) where given, else those its
    `labels` say it was built on (no image: the plan's, `planned`). A disagreement is said."""
    if labels is None:
        return Choice(None)
    built = built_on(labels)
    if told is not None:
        if built == told:
            return Choice(None)
        return Choice(
            None,
            f"{reference}: built with --bases {built} (its {BASES_LABEL} label); judged with --bases {told}, as told",
        )
    if built == planned:
        return Choice(None)
    note = (
        f"{reference}: judged with --bases {built}, as it was built (its {BASES_LABEL} label); the matrix asks for "
        f"--bases {planned} (say --bases {planned} to judge it by that)"
    )
    return Choice(built, note)


Labels = Callable[[str], dict[str, str] | None]  # an image's labels (None: no such image)


def judged(
    args: argparse.Namespace,
    labels_of: Labels,
    chosen: list[planning.Selected],
    say: Callable[[str], None],
    plans: dict[str, planning.Plan] | None = None,
) -> list[tuple[Combination, Image]]:
    """Each selected image with the combination to judge it by (see the module): where the bases differ from the
    plan's, the image of the plan loaded with those bases (same folder, flavor and platform; kept in `plans` for
    the next call). `labels_of` reads an image's labels (the engine's `labels`: None when it is not there); `say`
    prints a disagreement."""
    told = getattr(args, "os_bases", None) or None  # unset: None, or the empty setting
    plans = {} if plans is None else plans
    found: list[tuple[Combination, Image]] = []
    for selected in chosen:
        combination = selected.combination
        for image in selected.images:
            if combination.os.provider != REGISTRY:  # always bootstrapped: nothing to choose
                found.append((combination, image))
                continue
            choice = choose(told, combination.bases, labels_of(image.platform_reference), image.platform_reference)
            if choice.note:
                say(choice.note)
            if choice.bases is None:
                found.append((combination, image))
                continue
            if choice.bases not in plans:
                plans[choice.bases] = planning.load(
                    args.matrix,
                    args.templates,
                    args.images_dir,
                    base_registry=args.base_registry,
                    os_bases=choice.bases,
                )
            found.append(_same(plans[choice.bases], combination, image))
    return found


def _same(loaded: planning.Plan, combination: Combination, image: Image) -> tuple[Combination, Image]:
    """The image of `loaded` that is `image` (its folder, flavor and platform); the one given where none is."""
    for other in loaded.combinations:
        if other.folder == combination.folder:
            for candidate in other.images:
                if (candidate.flavor, candidate.platform) == (image.flavor, image.platform):
                    return other, candidate
    return combination, image
