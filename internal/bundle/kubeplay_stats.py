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
    from ansible import context as ansible_context
except ImportError:  # older Ansible
    ansible_context = None

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
# bundle.MaxChanges and bundle.MaxDiff: the changed tasks a check keeps,
# and the characters of each one's diff.
MAX_CHANGES = 100
MAX_DIFF = 8192


def _check_mode():
    try:
        return bool(ansible_context.CLIARGS.get('check'))
    except Exception:
        return False


def _stable(diffs):
    # A module's temporary file, or the run's own directory (a template's
    # source), in a header would make each check's diff differ from the
    # last: such a header goes, or loses the directory.
    if isinstance(diffs, dict):
        diffs = [diffs]
    cwd = os.getcwd().rstrip('/') + '/'
    out = []
    for d in diffs:
        if isinstance(d, dict):
            d = dict(d)
            for key in ('before_header', 'after_header'):
                h = d.get(key)
                if not isinstance(h, str):
                    continue
                if '/.ansible/tmp/' in h or '/ansible-tmp-' in h or '/ansible-local-' in h:
                    del d[key]
                else:
                    d[key] = h.replace(cwd, '')
        out.append(d)
    return out


def _cut_diff(text):
    if len(text) <= MAX_DIFF:
        return text, 0
    return text[:MAX_DIFF], len(text)


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
        # In check mode (--check): the tasks that would change a host, with
        # their diffs (--diff), and the tasks skipped as not checkable.
        self.check = _check_mode()
        self.changes = []
        self.change_count = 0
        self.not_checkable = 0

    def _diff_text(self, res):
        diffs = res.get('diff')
        if not diffs:
            results = res.get('results')
            if isinstance(results, list):
                diffs = [r.get('diff') for r in results if isinstance(r, dict) and r.get('changed') and r.get('diff')]
        if not diffs:
            return ''
        try:
            return self._get_diff(_stable(diffs)) or ''
        except Exception:
            return _text(diffs)

    def v2_runner_on_ok(self, result):
        if not self.check:
            return
        res = result._result if isinstance(result._result, dict) else {}
        if not res.get('changed'):
            return
        self.change_count += 1
        if len(self.changes) >= MAX_CHANGES:
            return
        diff, full = _cut_diff(self._diff_text(res))
        self.changes.append({
            'host': _text(result._host.get_name()),
            'task': _text(result._task.get_name()),
            'action': _text(getattr(result._task, 'action', '') or ''),
            'diff': diff,
            'diff_size': full,
            # check_mode: false on the task: it ran for real.
            'ran': getattr(result._task, 'check_mode', None) is False,
        })

    def v2_runner_on_skipped(self, result):
        if not self.check:
            return
        res = result._result if isinstance(result._result, dict) else {}
        if 'check mode' in str(res.get('msg', '')):
            # "remote module (x) does not support check mode", and the like.
            self.not_checkable += 1

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
        if self.check:
            doc['check'] = {'changes': self.changes, 'change_count': self.change_count,
                            'not_checkable': self.not_checkable}
        tmp = path + '.tmp'
        with open(tmp, 'w') as f:
            json.dump(doc, f, sort_keys=True, cls=AnsibleJSONEncoder)
        os.rename(tmp, path)
