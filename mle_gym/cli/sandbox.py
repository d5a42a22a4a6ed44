"""`mle-gym image build|info` and `mle-gym gc`: the sandbox image and what episodes left behind."""

from __future__ import annotations

import argparse
import json
import sys

from mle_gym.errors import DockerUnavailableError


def _cmd_image_build(args: argparse.Namespace) -> int:
    from mle_gym.sandbox.docker.image import build_image

    def progress(line: str) -> None:
        print(f"mle-gym image: {line}", file=sys.stderr, flush=True)

    tag = build_image(offline=args.offline, tag=args.tag, profile=args.profile, mirror=args.mirror,
                      rebuild_base=args.rebuild_base, progress=progress)
    print(f"built {tag}")
    return 0


def _cmd_image_info(args: argparse.Namespace) -> int:
    from mle_gym.sandbox.docker.image import chosen_packages, list_images

    images = list_images()
    if args.json:
        print(json.dumps([image.model_dump() for image in images], indent=1))
        return 0
    if not images:
        print("no mle-gym images; build one with `mle-gym image build --offline --profile slim` (a few minutes) "
              "or `--profile full` (MLE-bench's package set, about an hour)", file=sys.stderr)
        return 0
    for image in images:
        size = f"{image.size_bytes / 1e9:.1f} GB"
        print(f"{', '.join(image.tags) or image.id[:19]}  profile {image.profile or 'unknown'}  {size}  "
              f"created {image.created[:19]}  python {image.python or '?'}")
        known = [f"{name} {version}" for name, version in chosen_packages({"packages": image.packages})]
        more = f", and {len(known) - 14} more of the profile's list" if len(known) > 14 else ""
        print(f"    {len(image.packages)} Python distributions; " + (", ".join(known[:14]) + more if known else "no manifest"))
    return 0


def _cmd_gc(args: argparse.Namespace) -> int:
    from mle_gym.sandbox.local import gc_local_workspaces

    removed = gc_local_workspaces(all_=args.all)
    try:
        from mle_gym.sandbox.docker import gc_containers, gc_data_images

        removed += gc_containers(all_=args.all)
        removed += gc_data_images(older_than_s=0 if args.all else 7 * 24 * 3600)
    except DockerUnavailableError as exc:
        print(f"mle-gym: Docker not reachable, only local workspaces were collected ({exc})", file=sys.stderr)
    for name in removed:
        print(f"removed {name}")
    print(f"{len(removed)} container(s), workspace(s) and data image(s) removed", file=sys.stderr)
    return 0



def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("image", help="build the sandbox image, or list the ones built")
    image_sub = p.add_subparsers(dest="image_command", metavar="ACTION")
    b = image_sub.add_parser("build", help="build mle-gym:PROFILE (online from the GPU Dockerfile, or --offline)")
    b.add_argument("--offline", action="store_true",
                   help="debootstrap a Debian root filesystem and docker-import it: no registry needed")
    b.add_argument("--tag", default=None, help="the image's tag (default: mle-gym:full or mle-gym:slim, by profile)")
    b.add_argument("--profile", choices=["full", "slim"], default="full",
                   help="full (default): MLE-bench's agent package set (PyTorch, TensorFlow, LightGBM, ...) from PyPI, "
                        "about 30 GB of disk while building; slim: numpy, pandas, scikit-learn and pillow from Debian "
                        "(a couple of minutes; what CI builds)")
    b.add_argument("--mirror", default=None, help="Debian mirror for --offline (default: this machine's apt source)")
    b.add_argument("--rebuild-base", action="store_true", help="redo debootstrap and the base import")
    b.set_defaults(func=_cmd_image_build)
    i = image_sub.add_parser("info", aliases=["list"], help="the mle-gym images here: profile, size, key package versions")
    i.add_argument("--json", action="store_true")
    i.set_defaults(func=_cmd_image_info)

    p = sub.add_parser("gc", help="remove mle-gym containers and workspaces left behind by processes that died, "
                                  "and data images unused for a week (all unused ones with --all)")
    p.add_argument("--all", action="store_true", help="remove every mle-gym container and workspace, also of live processes")
    p.set_defaults(func=_cmd_gc)
