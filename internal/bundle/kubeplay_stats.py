# kubeplay_stats: writes the play recap as JSON to $KUBEPLAY_STATS_FILE, so
# the provider reads per-host stats instead of scraping the recap text.
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json
import os

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = '''
    name: kubeplay_stats
    type: aggregate
    short_description: write per-host stats as JSON for kubeplay
    description:
      - Writes the play recap to the file named by KUBEPLAY_STATS_FILE.
'''

KEYS = ('ok', 'changed', 'unreachable', 'failures', 'skipped', 'rescued', 'ignored')


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = 'aggregate'
    CALLBACK_NAME = 'kubeplay_stats'
    CALLBACK_NEEDS_ENABLED = True

    def v2_playbook_on_stats(self, stats):
        hosts = {}
        for host in sorted(stats.processed.keys()):
            summary = stats.summarize(host)
            hosts[host] = dict((k, int(summary.get(k, 0))) for k in KEYS)
        path = os.environ.get('KUBEPLAY_STATS_FILE')
        if path:
            with open(path, 'w') as f:
                json.dump({'hosts': hosts}, f, sort_keys=True)
