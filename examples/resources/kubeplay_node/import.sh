# A held node is imported as <container_group>/<name>.
terraform import kubeplay_node.debug ci/debug
