"""Train a French→English attention NMT model.

python train.py                                  # Bahdanau model on the built-in corpus
python train.py model=luong                      # the scaled-dot / look-ahead variant
python train.py experiment=tatoeba_bahdanau      # the reference setting on real data
python train.py ckpt_path=runs/.../checkpoints/last.ckpt   # resume
"""

from __future__ import annotations

import copy
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import hydra
from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from nmt.config_keys import CONFIG_DIR  # the repository's conf/, which the package carries as nmt/conf (a link there)


@hydra.main(config_path=str(CONFIG_DIR), config_name="config", version_base="1.3")
def _train(cfg: DictConfig) -> float | None:
    from nmt.errors import one_line_errors
    from nmt.training.run import train

    _restore_full_error()  # the run's own errors: Hydra's usual report (a bug's traceback), its children unchanged
    with one_line_errors():
        return train(cfg)


def main() -> None:
    """``train.py``: Hydra's command line; a config it cannot compose (an unknown key or option) is one line too."""
    with hydra_errors():
        _train()


_FULL_ERROR = "HYDRA_FULL_ERROR"
_user_full_error: str | None = None


@contextmanager
def hydra_errors() -> Iterator[None]:
    """Hydra's errors before the run starts (composing the config) as one line and exit status 1.

    Hydra prints them on several lines itself, with advice (``+model.foo=3``) that the project then refuses; with
    ``HYDRA_FULL_ERROR`` set it raises them instead, here, where :func:`hydra_error_line` says them in one line.
    """
    global _user_full_error
    _user_full_error = os.environ.get(_FULL_ERROR)
    os.environ[_FULL_ERROR] = "1"
    try:
        yield
    except Exception as e:
        _restore_full_error()
        line = hydra_error_line(e)
        if line is None or _user_full_error:  # a bug, or the user asked for Hydra's full report
            raise
        print(f"error: {line}", file=sys.stderr)
        sys.exit(1)
    finally:
        _restore_full_error()


def _restore_full_error() -> None:
    if _user_full_error is None:
        os.environ.pop(_FULL_ERROR, None)
    else:
        os.environ[_FULL_ERROR] = _user_full_error


def hydra_error_line(e: BaseException) -> str | None:
    """The one line for an error of Hydra's before the run (None for anything else): an unknown key names the keys
    there are, an unknown option of a group the options there are."""
    from hydra.errors import ConfigCompositionException, HydraException, MissingConfigException, OverrideParseException
    from omegaconf.errors import ConfigAttributeError, ConfigKeyError

    from nmt.config_keys import unknown_key
    from nmt.errors import one_line

    cause = e.__cause__
    unknown = isinstance(cause, (ConfigKeyError, ConfigAttributeError)) and cause.full_key
    if isinstance(e, ConfigCompositionException) and unknown:
        parent = cause.parent_node
        if parent is not None and not len(parent) and "." in str(cause.full_key):  # under ??? (data=base's source)
            from nmt.config_keys import missing_advice

            where = str(cause.full_key).rsplit(".", 1)[0]
            return f"{cause.full_key}: no such key, since {where} holds nothing{missing_advice(where)}"
        known = [str(k) for k in parent.keys() if k != "hydra" or parent._get_parent() is not None] if parent else []
        target = parent.get("_target_") if parent is not None and not str(cause.full_key).startswith("hydra.") else None
        advice = str(e).split("To append to your config use ", 1)
        if target and _accepts(target, str(cause.key)) and len(advice) == 2:
            add = advice[1].split()[0]  # a key its target takes, only not set in conf/: Hydra's advice works
            return f"{cause.full_key}: not in conf/; {target} takes it: add it with {add}"
        return unknown_key(str(cause.full_key), sorted(k for k in known if k != "_target_"))
    if isinstance(e, MissingConfigException) and e.missing_cfg_file and e.options is not None:
        group, _, option = e.missing_cfg_file.rpartition("/")
        return f"{group}={option}: no such option; {group} is one of {', '.join(e.options)}"
    if isinstance(e, (ConfigCompositionException, OverrideParseException, HydraException)):
        text = str(e).split("\nSee https://hydra.cc", 1)[0]
        return one_line(text + (f" ({cause})" if cause is not None else ""))
    return None


def _accepts(target: Any, key: str) -> bool:
    from nmt.arguments import target_parameters

    params = target_parameters(target)
    return params is None or key in params


class FreshRun(Callback):
    """Refuses a run whose run directory holds the checkpoints of another, before Hydra writes anything there (its
    ``.hydra/`` record of the old run, its log): a fresh run never continues an old one (``ckpt_path=...`` does).
    Registered as ``hydra.callbacks.fresh_run`` in ``conf/config.yaml``."""

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        self._refuse(config, "hydra.run.dir")

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        self._refuse(config, "hydra.sweep.dir")

    @staticmethod
    def _refuse(config: DictConfig, key: str) -> None:
        from hydra.core.hydra_config import HydraConfig
        from omegaconf import OmegaConf, open_dict, read_write

        from nmt.cli.options import output_folder
        from nmt.errors import one_line_errors
        from nmt.training.run_dir import CREATED, checkpoint_dirs, refuse_used_run_dir

        with one_line_errors():
            run_dir = Path(str(OmegaConf.select(config, key))).resolve()  # ${now:...} resolved once, kept for the run
            output_folder(f"{key}=", str(run_dir))  # Hydra makes it next, with a traceback where it cannot
            if not run_dir.exists():
                CREATED.add(str(run_dir))
                return
            if key == "hydra.sweep.dir":  # the jobs' folders are named later: any checkpoint below is an old run's
                if not config.ckpt_path:
                    folders = sorted({p.parent for p in run_dir.rglob("*.ckpt")})
                    refuse_used_run_dir(run_dir, {f"{key}/{i}": d for i, d in enumerate(folders)}, None, key)
                return
            resolved = copy.deepcopy(config)  # the callbacks' folders, as the run will see them
            with read_write(resolved.hydra.runtime), open_dict(resolved.hydra.runtime):
                resolved.hydra.runtime.output_dir = str(run_dir)
            before = HydraConfig.instance().cfg
            HydraConfig.instance().set_config(resolved)
            try:
                dirs = checkpoint_dirs(resolved)
            finally:
                HydraConfig.instance().cfg = before
            refuse_used_run_dir(run_dir, dirs, config.ckpt_path, key)


if __name__ == "__main__":
    main()
