# kubeplay_stats: writes the run's result as JSON to $KUBEPLAY_STATS_FILE:
# the play recap per host, the failed tasks and the set_stats data, so the
# provider reads them instead of scraping the output. The script sends the
# file on its own stderr once the playbook has ended (see bundle.ResultStream).
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import difflib
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
# and the characters of each one's diff (kept with KUBEPLAY_CHECK_DIFFS=1).
MAX_CHANGES = 100
MAX_DIFF = 8192


def _check_mode():
    try:
        return bool(ansible_context.CLIARGS.get('check'))
    except Exception:
        return False


def _check_diffs():
    # The run's plan_check_diffs: without it no diff text leaves the pod, as
    # a diff may hold what the play renders from secrets.
    return os.environ.get('KUBEPLAY_CHECK_DIFFS') == '1'


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


def _lines(value):
    if value is None:
        return []
    if not isinstance(value, str):
        # As Ansible's _get_diff shows a dict (a file's state).
        try:
            value = json.dumps(value, cls=AnsibleJSONEncoder, indent=4, sort_keys=True) + '\n'
        except Exception:
            value = str(value)
    return value.splitlines()


def _count(diffs):
    # The lines each diff adds and removes: before/after compared as
    # --diff does, or a module's prepared text's +/- lines.
    added = removed = 0
    for d in diffs:
        if isinstance(d, list):
            a, r = _count(d)
            added, removed = added + a, removed + r
        if not isinstance(d, dict):
            continue
        if 'before' in d or 'after' in d:
            ops = difflib.SequenceMatcher(None, _lines(d.get('before')), _lines(d.get('after')), autojunk=False)
            for tag, i1, i2, j1, j2 in ops.get_opcodes():
                if tag in ('replace', 'delete'):
                    removed += i2 - i1
                if tag in ('replace', 'insert'):
                    added += j2 - j1
        elif isinstance(d.get('prepared'), str):
            for line in d['prepared'].splitlines():
                if line.startswith('+') and not line.startswith('+++ '):
                    added += 1
                elif line.startswith('-') and not line.startswith('--- '):
                    removed += 1
    return added, removed


def _cut_diff(text):
    return text[:MAX_DIFF]


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
        # the size of their diffs (--diff), the text too with
        # KUBEPLAY_CHECK_DIFFS=1, and the tasks skipped as not checkable.
        self.check = _check_mode()
        self.diffs = _check_diffs()
        self.changes = []
        self.change_count = 0
        self.not_checkable = 0

    def _diffs(self, res):
        diffs = res.get('diff')
        if not diffs:
            results = res.get('results')
            if isinstance(results, list):
                diffs = [r.get('diff') for r in results if isinstance(r, dict) and r.get('changed') and r.get('diff')]
        if not diffs:
            return []
        return _stable(diffs)

    def _diff_text(self, diffs):
        if not diffs:
            return ''
        try:
            return self._get_diff(diffs) or ''
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
        diffs = self._diffs(res)
        text = self._diff_text(diffs)
        added, removed = _count(diffs)
        self.changes.append({
            'host': _text(result._host.get_name()),
            'task': _text(result._task.get_name()),
            'action': _text(getattr(result._task, 'action', '') or ''),
            # The size of the change always; its text only when asked for.
            'diff': _cut_diff(text) if self.diffs else None,
            'diff_size': len(text),
            'lines_added': added,
            'lines_removed': removed,
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
