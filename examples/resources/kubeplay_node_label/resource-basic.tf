# More CPU and memory for heavy playbooks: a run that names the label gets
# these requests and limits on its pod.
resource "kubeplay_node_label" "large" {
  name   = "large"
  cpu    = "2"
  memory = 4096
}
