# kubeplay_stats: writes the run's result as JSON to $KUBEPLAY_STATS_FILE:
# the play recap per host, the failed tasks and the set_stats data, so the
# provider reads them instead of scraping the output. The script sends the
# file on its own stderr once the playbook has ended (see bundle.ResultStream).
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json
import os

from ansible.plugins.callback import CallbackBase

try:
    from ansible.module_utils.common.json import AnsibleJSONEncoder
except ImportError:  # older Ansible
    from ansible.parsing.ajson import AnsibleJSONEncoder

DOCUMENTATION = '''
    name: kubeplay_stats
    type: aggregate
    short_description: write the run's result as JSON for kubeplay
    description:
      - Writes the play recap, the failed tasks and the set_stats data to the file named by KUBEPLAY_STATS_FILE.
'''

KEYS = ('ok', 'changed', 'unreachable', 'failures', 'skipped', 'rescued', 'ignored')

# bundle.MaxFailedTasks and bundle.MaxTaskMessage.
MAX_FAILED_TASKS = 100
MAX_MESSAGE = 2048


def _text(value):
    if value is None:
        return ''
    if not isinstance(value, str):
        try:
            value = json.dumps(value, cls=AnsibleJSONEncoder, sort_keys=True)
        except Exception:
            value = str(value)
    if len(value) > MAX_MESSAGE:
        value = value[:MAX_MESSAGE - 3] + '...'
    return value


def _message(res):
    for key in ('msg', 'reason', 'stderr', 'exception'):
        if res.get(key):
            return _text(res[key])
    results = res.get('results')
    if isinstance(results, list):
        for item in results:
            if isinstance(item, dict) and item.get('failed') and item.get('msg'):
                return _text(item['msg'])
    return ''


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = 'aggregate'
    CALLBACK_NAME = 'kubeplay_stats'
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super(CallbackModule, self).__init__(*args, **kwargs)
        self.failed_tasks = []
        self.failed_task_count = 0

    def _failed(self, result, unreachable):
        self.failed_task_count += 1
        if len(self.failed_tasks) >= MAX_FAILED_TASKS:
            return
        res = result._result if isinstance(result._result, dict) else {}
        self.failed_tasks.append({
            'host': _text(result._host.get_name()),
            'task': _text(result._task.get_name()),
            'message': _message(res),
            'unreachable': unreachable,
        })

    def v2_runner_on_failed(self, result, ignore_errors=False):
        if not ignore_errors:
            self._failed(result, False)

    def v2_runner_on_unreachable(self, result):
        if not getattr(result._task, 'ignore_unreachable', False):
            self._failed(result, True)

    def v2_playbook_on_stats(self, stats):
        hosts = {}
        for host in sorted(stats.processed.keys()):
            summary = stats.summarize(host)
            hosts[host] = dict((k, int(summary.get(k, 0))) for k in KEYS)
        # As AWX keeps job artifacts: the data set_stats set for the whole
        # run (per_host: false), merged or replaced as its aggregate says.
        custom = getattr(stats, 'custom', None) or {}
        artifacts = custom.get('_run') or None
        path = os.environ.get('KUBEPLAY_STATS_FILE')
        if not path:
            return
        doc = {'hosts': hosts, 'failed_tasks': self.failed_tasks,
               'failed_task_count': self.failed_task_count, 'artifacts': artifacts}
        tmp = path + '.tmp'
        with open(tmp, 'w') as f:
            json.dump(doc, f, sort_keys=True, cls=AnsibleJSONEncoder)
        os.rename(tmp, path)
