"""Tasks: the benchmark registry (`load_task`, `list_tasks`), the built-in word problems
(`eval.tasks.arith_data`) and the hand-off task with its rows (`eval.tasks.handoff*`). The schemas and
data sources are in eval/tasks/README.md.

Example:
```python
from eval.tasks import load_task

task = load_task("arith", limit=2)
assert len(task.items) == 2
```
"""

from eval.tasks.registry import Item, Task, list_tasks, load_task

__all__ = ["Item", "Task", "list_tasks", "load_task"]
