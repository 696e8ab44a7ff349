"""The tables of ``tapt sweep``: the settings ranked by mean dev (console and ``sweep.md``).
Takes the sweep and its result as :mod:`tapt.selection.sweep` makes them."""

from __future__ import annotations


def mean_std_text(mean: float | None, std: float | None) -> str:
    """``0.4123 ± 0.0101``; one seed: ``0.4123``; nothing: ``-``."""
    if mean is None:
        return "-"
    return f"{mean:.4f}" + (f" ± {std:.4f}" if std is not None else "")


def setting_rows(result, with_test: bool) -> tuple[list[str], list[list[str]]]:
    """The settings table (header, rows), shared by the terminal and ``sweep.md``."""
    header = ["setting", "seeds", f"dev {result.metric}"] + \
        ([f"test {result.metric}"] if with_test else []) + [""]
    rows = []
    for setting in result.settings:
        row = [setting.setting, f"{setting.finished}/{setting.trials}",
               mean_std_text(setting.dev_mean, setting.dev_std)]
        if with_test:
            row.append(mean_std_text(setting.test_mean, setting.test_std))
        row.append("winner" if setting is result.winner else "")
        rows.append(row)
    return header, rows


def _markdown_table(header: list[str], rows: list[list[str]]) -> list[str]:
    def line(cells: list[str]) -> str:
        return "| " + " | ".join(" ".join(cell.split()).replace("|", "\\|")
                                 for cell in cells) + " |"

    return [line(header), "|" + "---|" * len(header)] + [line(row) for row in rows]


def report_markdown(sweep, result) -> str:
    """``sweep.md``: the settings ranked, then every trial's status and metrics."""
    header, rows = setting_rows(result, sweep.run_test)
    lines = [f"# Sweep of {sweep.recipe_path}", "",
             (f"Ranked by mean dev {result.metric} of each run's best checkpoint over its "
              "finished seeds (± sample standard deviation)."), ""]
    lines += _markdown_table(header, rows)
    best = result.best_trial
    if best is not None:
        lines += ["", (f"Winner: {result.winner.setting}; its best trial: {best.name} "
                       f"(model: {best.folder / 'final'}).")]
    if result.note:
        lines += ["", f"Note: {result.note}."]
    trial_header = ["trial", "status", "best step", f"dev {result.metric}"] + \
        ([f"test {result.metric}"] if sweep.run_test else [])
    trial_rows = []
    for trial in sweep.trials:
        dev = trial.dev.get(result.metric) if trial.dev else None
        test = trial.test.get(result.metric) if trial.test else None
        row = [trial.name, trial.status if not trial.error else f"{trial.status}: {trial.error}",
               "-" if trial.best_step is None else str(trial.best_step),
               mean_std_text(dev, None)] + ([mean_std_text(test, None)] if sweep.run_test
                                            else [])
        trial_rows.append(row)
    lines += ["", "## Trials", ""] + _markdown_table(trial_header, trial_rows)
    return "\n".join(lines) + "\n"
