"""configs/cluster/rayjob.yaml (a KubeRay RayJob), the Dockerfile that builds its image and the
cluster page (docs/guide/cluster.md, "Running on a Ray cluster") agree: the job runs `ylink run` on a pipeline of this repository
against the cluster it starts, writing to object storage; every container runs the one image the
Dockerfile builds and docs/guide/cluster.md names, at the Ray version of the Dockerfile's FROM line; Ray's CPU
counts are what Kubernetes guarantees each pod; no credentials are written in the manifest.

`manifest_problems` lists every disagreement; test_each_check_can_fail breaks the files one way at a
time and expects the check for that way to report it."""
from __future__ import annotations

import copy
import re
import shlex
import tomllib
from fractions import Fraction
from pathlib import Path

import pytest
import yaml

from .conftest import REPO

CLUSTER = REPO / "configs" / "cluster"
RAYJOB = CLUSTER / "rayjob.yaml"
DOCKERFILE = CLUSTER / "Dockerfile"
SECTION = "# Running on a Ray cluster\n"  # the page docs/guide/cluster.md (the README links to it)
OBJECT_STORES = {"s3", "s3a", "gs", "gcs", "abfs", "az"}   # URLs every node reaches; never file:// or memory://
SECRET_NAME = re.compile(r"KEY|SECRET|TOKEN|PASSWORD|CREDENTIAL", re.I)
IMAGE_REF = re.compile(r"[\w.\-/]*ylink-data:[\w.\-]+")
RAY_IMAGE_REF = re.compile(r"rayproject/ray:[\w.\-]+")
FROM_LINE = re.compile(r"^FROM\s+(rayproject/ray:(\d+\.\d+\.\d+)-py3\d+)\s*$", re.M)


def cluster_section(readme: str) -> str:
    if SECTION not in readme:
        return ""
    rest = readme.split(SECTION, 1)[1]
    return rest.split("\n## ", 1)[0]


def entrypoint_parts(entrypoint: str) -> tuple[list[str], dict[str, str]]:
    """The entrypoint's words and its `--set KEY=VALUE` overrides."""
    argv = shlex.split(entrypoint)
    overrides: dict[str, str] = {}
    for i, word in enumerate(argv):
        item = argv[i + 1] if word == "--set" and i + 1 < len(argv) else \
            word.removeprefix("--set=") if word.startswith("--set=") else None
        if item is not None and "=" in item:
            key, value = item.split("=", 1)
            overrides[key] = value
    return argv, overrides


def ray_containers(spec: dict) -> list[tuple[str, dict, dict]]:
    """(where, the Ray container, its group) for the head group and every worker group."""
    cluster = spec.get("rayClusterSpec") or {}
    groups = [("head", cluster.get("headGroupSpec") or {})]
    groups += [(f"worker group {g.get('groupName')!r}", g) for g in cluster.get("workerGroupSpecs") or []]
    found = []
    for where, group in groups:
        for container in ((group.get("template") or {}).get("spec") or {}).get("containers") or []:
            found.append((where, container, group))
    return found


def cpus(quantity) -> Fraction:
    """A Kubernetes CPU quantity ("8", 8, "500m") in CPUs."""
    text = str(quantity)
    return Fraction(text[:-1]) / 1000 if text.endswith("m") else Fraction(text)


def manifest_problems(manifest: dict, readme: str, dockerfile: str, version: str) -> list[str]:
    problems: list[str] = []
    if manifest.get("apiVersion") != "ray.io/v1":
        problems.append(f"apiVersion is {manifest.get('apiVersion')!r}, not ray.io/v1")
    if manifest.get("kind") != "RayJob":
        problems.append(f"kind is {manifest.get('kind')!r}, not RayJob")
    spec = manifest.get("spec") or {}

    # The entrypoint: `ylink run` on a pipeline of this repository, on this cluster, into object storage.
    entrypoint = spec.get("entrypoint") or ""
    argv, overrides = entrypoint_parts(entrypoint)
    if argv[:2] != ["ylink", "run"]:
        problems.append(f"the entrypoint does not start with `ylink run`: {entrypoint!r}")
    pipeline = argv[2] if len(argv) > 2 else ""
    if not pipeline or pipeline.startswith("-") or not (REPO / pipeline).is_file():
        problems.append(f"the entrypoint's pipeline {pipeline!r} is not a file of this repository")
    if overrides.get("ray.address") != "auto":
        problems.append(f"the entrypoint does not set ray.address=auto: {entrypoint!r}")
    output = overrides.get("output.path", "")
    if output.split("://", 1)[0] not in OBJECT_STORES or "://" not in output:
        problems.append(f"the entrypoint's output.path {output!r} is not object storage every pod reaches")
    for key in overrides:
        if SECRET_NAME.search(key.rsplit(".", 1)[-1]):
            problems.append(f"the entrypoint sets a credential inline: {key}")

    # The cluster: deleted after the run, tasks on the workers only, CPUs as Kubernetes guarantees them.
    if spec.get("shutdownAfterJobFinishes") is not True:
        problems.append("shutdownAfterJobFinishes is not true")
    ttl = spec.get("ttlSecondsAfterFinished")
    if not isinstance(ttl, int) or isinstance(ttl, bool) or ttl < 0:
        problems.append(f"ttlSecondsAfterFinished is {ttl!r}, not a number of seconds")
    cluster = spec.get("rayClusterSpec") or {}
    head = cluster.get("headGroupSpec") or {}
    if (head.get("rayStartParams") or {}).get("num-cpus") != "0":
        problems.append(f"the head's rayStartParams num-cpus is {(head.get('rayStartParams') or {}).get('num-cpus')!r}, "
                        "not \"0\" (tasks would run beside the driver)")
    workers = cluster.get("workerGroupSpecs") or []
    if not workers:
        problems.append("no workerGroupSpecs: nowhere for tasks to run")
    for group in [head, *workers]:
        for key, value in (group.get("rayStartParams") or {}).items():
            if not isinstance(value, str):
                problems.append(f"rayStartParams {key}: {value!r} is not a string (KubeRay takes strings only)")
    for group in workers:
        name = group.get("groupName")
        containers = ((group.get("template") or {}).get("spec") or {}).get("containers") or []
        if not containers:
            problems.append(f"worker group {name!r} has no container")
            continue
        resources = containers[0].get("resources") or {}
        requests, limits = resources.get("requests"), resources.get("limits")
        if not limits or "cpu" not in limits or "memory" not in limits or requests != limits:
            problems.append(f"worker group {name!r}: resources requests {requests!r} != limits {limits!r} "
                            "(or no cpu/memory limit)")
        num_cpus = (group.get("rayStartParams") or {}).get("num-cpus")
        if num_cpus is None or not limits or "cpu" not in limits or cpus(num_cpus) != cpus(limits["cpu"]):
            problems.append(f"worker group {name!r}: rayStartParams num-cpus {num_cpus!r} is not its CPU limit "
                            f"{(limits or {}).get('cpu')!r}")

    # One image everywhere: the one the Dockerfile builds and docs/guide/cluster.md names, at this version.
    found = ray_containers(spec)
    images = {c.get("image") for _, c, _ in found}
    if len(images) != 1:
        problems.append(f"the containers run {len(images)} images, not one: {sorted(map(str, images))}")
    image = sorted(map(str, images))[0] if images else ""
    if image.rsplit(":", 1)[-1] != version:
        problems.append(f"the image {image!r} is not tagged with ylink-data's version {version}")
    section = cluster_section(readme)
    if not section:
        problems.append("docs/guide/cluster.md has no \"Running on a Ray cluster\" section")
    for where, text in (("docs/guide/cluster.md", section), ("the Dockerfile", dockerfile)):
        named = set(IMAGE_REF.findall(text))
        if named != {image}:
            problems.append(f"{where} names the image(s) {sorted(named)}, not the manifest's {image!r}")
    if not re.search(rf"docker build .*-t {re.escape(image)} ", dockerfile):
        problems.append(f"the Dockerfile's usage line does not build {image!r}")

    # Ray: the manifest's rayVersion is the Ray the image carries (the Dockerfile's FROM line).
    froms = FROM_LINE.findall(dockerfile)
    if len(froms) != 1:
        problems.append(f"the Dockerfile has {len(froms)} `FROM rayproject/ray:X.Y.Z-pyNNN` lines, not one")
    else:
        base, ray_version = froms[0]
        if str(cluster.get("rayVersion")) != ray_version:
            problems.append(f"rayVersion {cluster.get('rayVersion')!r} is not the image's Ray {ray_version}")
        named = set(RAY_IMAGE_REF.findall(section))
        if named != {base}:
            problems.append(f"docs/guide/cluster.md names the base image(s) {sorted(named)}, not {base}")
        if f'rayVersion: "{ray_version}"' not in section:
            problems.append(f"docs/guide/cluster.md does not give rayVersion \"{ray_version}\"")

    # Credentials come from a Kubernetes Secret, in every Ray container, never written here.
    for where, container, _ in found:
        for item in container.get("env") or []:
            if "value" in item and SECRET_NAME.search(str(item.get("name"))):
                problems.append(f"{where}: {item.get('name')} is written in the manifest, not read from a Secret")
        from_secret = any("secretRef" in e for e in container.get("envFrom") or []) or any(
            "secretKeyRef" in (e.get("valueFrom") or {}) for e in container.get("env") or [])
        if not from_secret:
            problems.append(f"{where}: no credentials from a Secret (envFrom secretRef or secretKeyRef)")

    if entrypoint and entrypoint not in section:
        problems.append(f"docs/guide/cluster.md does not show the entrypoint {entrypoint!r}")
    return problems


def _files():
    manifest = yaml.safe_load(RAYJOB.read_text())
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    return manifest, (REPO / "docs" / "guide" / "cluster.md").read_text(), DOCKERFILE.read_text(), version


def test_every_yaml_under_configs_cluster_parses():
    paths = sorted(CLUSTER.glob("*.yaml")) + sorted(CLUSTER.glob("*.yml"))
    assert RAYJOB in paths
    for path in paths:
        docs = list(yaml.safe_load_all(path.read_text()))
        assert docs and all(isinstance(d, dict) for d in docs), path


def test_rayjob_dockerfile_and_readme_agree():
    assert manifest_problems(*_files()) == []


def test_entrypoint_config_is_valid():
    """The entrypoint's pipeline with its overrides passes ylink's own validation (no key it sets is unknown)."""
    from ylink_data.engine.config import load_config

    manifest = yaml.safe_load(RAYJOB.read_text())
    argv, overrides = entrypoint_parts(manifest["spec"]["entrypoint"])
    cfg = load_config(REPO / argv[2], [f"{k}={v}" for k, v in overrides.items()])
    assert cfg.ray.address == "auto"
    assert cfg.output.path == overrides["output.path"]


def _set(path: str, value):
    def change(m, r, d):
        *parents, last = path.split("/")
        node = m
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        if value is _DELETE:
            del node[last]
        else:
            node[last] = value
        return m, r, d
    return change


_DELETE = object()
_W = "spec/rayClusterSpec/workerGroupSpecs/0"
_WC = f"{_W}/template/spec/containers/0"
_HC = "spec/rayClusterSpec/headGroupSpec/template/spec/containers/0"


def _entrypoint(old: str, new: str):
    def change(m, r, d):
        assert old in m["spec"]["entrypoint"]
        m["spec"]["entrypoint"] = m["spec"]["entrypoint"].replace(old, new)
        return m, r, d
    return change


def _all_images(new: str):
    def change(m, r, d):
        for _, container, _ in ray_containers(m["spec"]):
            container["image"] = new
        return m, r, d
    return change


def _text(which: int, old: str, new: str):
    def change(m, r, d):
        texts = [m, r, d]
        assert old in texts[which], old
        texts[which] = texts[which].replace(old, new)
        return tuple(texts)
    return change


MUTATIONS = {
    "kind": (_set("kind", "RayCluster"), "kind is"),
    "apiVersion": (_set("apiVersion", "ray.io/v1alpha1"), "apiVersion is"),
    "not ylink run": (_entrypoint("ylink run", "python -m ylink_data.cli run"), "does not start with `ylink run`"),
    "missing pipeline": (_entrypoint("pipelines/quickstart.yaml", "pipelines/nope.yaml"), "not a file of this repository"),
    "no ray.address": (_entrypoint("ray.address=auto", "ray.address=null"), "ray.address=auto"),
    "local output": (_entrypoint("output.path=s3://", "output.path=/"), "not object storage"),
    "file:// output": (_entrypoint("output.path=s3://", "output.path=file:///"), "not object storage"),
    "inline credential": (_entrypoint("--set ray.address", "--set storage.s3.secret=abc --set ray.address"),
                          "credential inline"),
    "no shutdown": (_set("spec/shutdownAfterJobFinishes", False), "shutdownAfterJobFinishes"),
    "no ttl": (_set("spec/ttlSecondsAfterFinished", _DELETE), "ttlSecondsAfterFinished"),
    "head cpus": (_set("spec/rayClusterSpec/headGroupSpec/rayStartParams/num-cpus", "1"), "head's rayStartParams"),
    "int param": (_set(f"{_W}/rayStartParams/num-cpus", 8), "is not a string"),
    "requests != limits": (_set(f"{_WC}/resources/requests/cpu", "4"), "requests"),
    "num-cpus != limit": (_set(f"{_W}/rayStartParams/num-cpus", "4"), "is not its CPU limit"),
    "no workers": (_set("spec/rayClusterSpec/workerGroupSpecs", []), "no workerGroupSpecs"),
    "two images": (_set(f"{_WC}/image", "registry.example.com/ylink-data:0.0.9"), "images, not one"),
    "image unlike README and Dockerfile": (_all_images("registry.example.com/ylink-data-other:0.1.0"),
                                           "names the image(s)"),
    "image of another version": (_all_images("registry.example.com/ylink-data:9.9.9"), "version"),
    "Dockerfile builds another tag": (_text(2, "-t registry.example.com/ylink-data:0.1.0 .",
                                            "-t registry.example.com/ylink-data:0.1.1 ."), "usage line"),
    "rayVersion": (_set("spec/rayClusterSpec/rayVersion", "2.59.0"), "is not the image's Ray"),
    "FROM another Ray": (_text(2, "FROM rayproject/ray:2.", "FROM rayproject/ray:3."), "is not the image's Ray"),
    "FROM another image": (_text(2, "FROM rayproject/ray:", "FROM python:3.11 # rayproject/ray:"), "lines, not one"),
    "README base image": (_text(1, "`rayproject/ray:", "`rayproject/ray:3."), "names the base image"),
    "README rayVersion": (_text(1, 'rayVersion: "', 'rayVersion: "3.'), "does not give rayVersion"),
    "secret written": (_set(f"{_HC}/env", [{"name": "AWS_SECRET_ACCESS_KEY", "value": "abc"}]), "written in the manifest"),
    "no secret": (_set(f"{_WC}/envFrom", _DELETE), "no credentials from a Secret"),
    "README entrypoint": (_text(1, "ylink run pipelines/quickstart.yaml --set ray.address=auto --set output.path=s3://your-bucket/ylink/quickstart\n",
                                "ylink run pipelines/quickstart.yaml --set output.path=s3://your-bucket/ylink/quickstart\n"),
                          "does not show the entrypoint"),
    "README image": (_text(1, "`registry.example.com/ylink-data:0.1.0`", "`registry.example.com/ylink-data:0.0.1`"),
                     "docs/guide/cluster.md names the image"),
    "README section gone": (_text(1, SECTION, "# Elsewhere\n"), "no \"Running on a Ray cluster\" section"),
}


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_each_check_can_fail(name):
    change, expected = MUTATIONS[name]
    manifest, readme, dockerfile, version = _files()
    manifest, readme, dockerfile = change(copy.deepcopy(manifest), readme, dockerfile)
    problems = manifest_problems(manifest, readme, dockerfile, version)
    assert any(expected in p for p in problems), problems
