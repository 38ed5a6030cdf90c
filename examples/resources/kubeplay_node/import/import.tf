# A held node is imported by <container_group>/<name>.
import {
  to = kubeplay_node.debug
  id = "ci/debug"
}
