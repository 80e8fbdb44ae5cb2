"""goldminer.DataLoader with the Dataset defined in the training script
itself (training_script.py, run as __main__ in an interpreter of its own):
its workers load the script as __mp_main__ to unpickle the dataset, every
item arrives once and as torch collates it, a namedtuple of the script is
this script's class again in the trainer, and a broken item's error names
the index with the script's traceback."""
import json
import os
import subprocess
import sys


def test_a_dataset_of_the_training_script_loads_on_the_workers_as_mp_main():
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "training_script.py")
    run = subprocess.run([sys.executable, script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         timeout=240, cwd=os.path.dirname(script))
    assert run.returncode == 0, "training_script.py exited %d: %s" % (run.returncode, run.stderr[-3000:])
    said = json.loads(run.stdout.splitlines()[-1])
    assert sorted(said["ids"]) == list(range(200)), "not every item once"
    assert said["ids"] != sorted(said["ids"]), "shuffle=True gave the dataset's order"
    assert said["collated_as_torch"]
    assert said["item_is_this_scripts_class"]
    assert "dataset[21]" in said["error"] and "ValueError: item 21 is broken" in said["error"]
    assert "training_script.py" in said["error"] and "__getitem__" in said["error"]
