"""junit.xml: one image's smoke results read from the JUnit XML pytest wrote (`smoke_result`), and the
report's one document with a testsuite per image (`merge_junit`)."""

from __future__ import annotations

from collections.abc import Sequence
from xml.etree import ElementTree

from torchimages.problems import escaped
from torchimages.reporting.model import FAILED_RESULTS, ImageReport, SmokeResult, TestCase, headline


def smoke_result(junit: bytes) -> SmokeResult:
    """One image's smoke results from the JUnit XML pytest wrote (ValueError when it is not JUnit XML)."""
    try:
        root = ElementTree.fromstring(junit)
    except ElementTree.ParseError as exc:
        raise ValueError(f"not JUnit XML: {exc}") from None
    cases = []
    for case in root.iter("testcase"):
        result, reason = "passed", ""
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                result = {"failure": "failed"}.get(child.tag, child.tag)
                reason = child.get("message") or (child.text or "").strip()
        cases.append(
            TestCase(
                name=case.get("name", ""),
                classname=case.get("classname", ""),
                result=result,
                reason=" ".join(reason.split())[:500],
                seconds=round(float(case.get("time") or 0), 3),
            )
        )
    properties = {p.get("name"): p.get("value") for p in root.iter("property")}
    return SmokeResult(tuple(cases), properties.get("gpu"), properties.get("driver"))


def _suite_of_outcome(image: ImageReport) -> ElementTree.Element:
    """A testsuite for an image whose suites did not run: one testcase, `build`, saying why."""
    suite = ElementTree.Element("testsuite", name=image.tag)
    case = ElementTree.SubElement(
        suite, "testcase", classname="torchimages.build", name="build", time=f"{image.total_seconds or 0:.3f}"
    )
    if image.result in FAILED_RESULTS:
        failure = ElementTree.SubElement(case, "failure", message=headline(image.reason))
        failure.text = image.reason
    elif image.result == "skipped":
        ElementTree.SubElement(case, "skipped", message=image.reason or "skipped")
    return suite


def security_cases(image: ImageReport) -> list[ElementTree.Element]:
    """A testcase per check of the security gate (classname torchimages.security): a failure listing what
    fails, skipped when it was left out or could not look (`not scanned: ...`), else passed."""
    cases = []
    for r in image.security:
        case = ElementTree.Element("testcase", classname="torchimages.security", name=r.check, time="0.000")
        if r.status == "failed":
            failure = ElementTree.SubElement(case, "failure", message=f"{r.check}: {len(r.failing)} failing")
            failure.text = "\n".join(r.failing)
        elif r.status != "passed":
            ElementTree.SubElement(case, "skipped", message=f"{r.status}: {r.note}" if r.note else r.status)
        if r.allowed:
            out = ElementTree.SubElement(case, "system-out")
            out.text = "\n".join(f"allowed by {a.entry} until {a.expires} ({a.reason}): {a.finding}" for a in r.allowed)
        cases.append(case)
    return cases


def _counted(suite: ElementTree.Element) -> dict[str, int]:
    cases = list(suite.iter("testcase"))
    return {
        "tests": len(cases),
        "failures": sum(c.find("failure") is not None for c in cases),
        "errors": sum(c.find("error") is not None for c in cases),
        "skipped": sum(c.find("skipped") is not None for c in cases),
    }


def _escaped(root: ElementTree.Element) -> None:
    """Every text and attribute of the document with what XML 1.0 cannot hold (a control character, a
    surrogate of an undecodable byte: an image's output carries them) as its escape (problems.escaped); a
    newline and a tab stay. ElementTree would write them as they are: a document no reader takes."""
    for element in root.iter():
        if element.text:
            element.text = escaped(element.text, keep="\n\t")
        if element.tail:
            element.tail = escaped(element.tail, keep="\n\t")
        for key, value in element.attrib.items():
            element.set(key, escaped(value, keep="\n\t"))


def merge_junit(images: Sequence[tuple[ImageReport, bytes | None]]) -> bytes:
    """One JUnit XML document with a testsuite per image, named by its tag: the suites pytest wrote for it
    (properties kept), or, where none ran, one `build` testcase saying why (failed, skipped)."""
    root = ElementTree.Element("testsuites", name="torchimages")
    total = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    seconds = 0.0
    for image, junit in images:
        if junit is None:
            suites = [_suite_of_outcome(image)]
        else:
            parsed = ElementTree.fromstring(junit)
            suites = [parsed] if parsed.tag == "testsuite" else list(parsed.iter("testsuite"))
        if suites:
            suites[0].extend(security_cases(image))
        for suite in suites:
            suite.set("name", image.tag)
            for key, value in _counted(suite).items():
                suite.set(key, str(value))
                total[key] += value
            seconds += float(suite.get("time") or 0)
            root.append(suite)
    for key, value in total.items():
        root.set(key, str(value))
    root.set("time", f"{seconds:.3f}")
    _escaped(root)
    ElementTree.indent(root)
    text: bytes = ElementTree.tostring(root, encoding="utf-8", xml_declaration=True)
    return text + b"\n"
