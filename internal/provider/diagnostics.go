// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/catalog"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/credential"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/kubeclient"
)

// Diagnostics that several resources and data sources report alike.

// addConnectionUnavailable: the provider's own connection cannot be used.
func addConnectionUnavailable(diags *diag.Diagnostics, err error) {
	diags.AddError("Kubernetes Connection Unavailable", err.Error())
}

// addCredentialUnavailable: a container group's credential cannot be used.
func addCredentialUnavailable(diags *diag.Diagnostics, group, cred string, err error) {
	if cred == "" {
		addConnectionUnavailable(diags, err)
		return
	}
	summary := "Credential Unavailable"
	if s := refusalSummary(err); s != "" {
		summary = s
	}
	diags.AddAttributeError(path.Root("credential"), summary,
		fmt.Sprintf("Container group %q cannot use credential %q: %v.", group, cred, err))
}

// refusalSummary is the summary of a credential kubeplay refuses to use,
// or "" when err is not such a refusal.
func refusalSummary(err error) string {
	var ce *catalog.Error
	var ne *credential.ExecNotAllowedError
	switch {
	case errors.Is(err, catalog.ErrTampered) && errors.As(err, &ce) && ce.Kind != "":
		return kindTitle(ce.Kind) + " Changed Outside Kubeplay"
	case errors.Is(err, catalog.ErrTampered):
		return "Credential Changed Outside Kubeplay"
	case errors.As(err, &ne):
		return "Exec Plugin Not Allowed"
	case errors.As(err, new(*credential.ExecPinMismatchError)):
		return "Exec Plugin Differs From Pin"
	case errors.Is(err, kubeclient.ErrHostAccess):
		return "Unsafe Kubeconfig Refused"
	}
	return ""
}

// refusalRemedy says how to repair a credential kubeplay refuses to use; ""
// when err is not such a refusal. Callers that format err into their own
// detail (groups, runs, phases) get it through credentialClients.
func refusalRemedy(err error) string {
	var ce *catalog.Error
	var he *kubeclient.HostAccessError
	var ne *credential.ExecNotAllowedError
	var pe *credential.ExecPinMismatchError
	switch {
	case errors.As(err, &ne):
		return execNotAllowedRemedy(ne)
	case errors.As(err, &pe):
		return execPinRemedy(pe)
	case errors.Is(err, catalog.ErrTampered) && errors.As(err, &ce):
		typ, what := definitionResource(ce.Kind)
		object, _, _ := strings.Cut(ce.Object, " ")
		return fmt.Sprintf("Write it again from its definition: apply the workspace that manages the %s "+
			"named %q (its plan shows the update that rewrites the %s), or run `terraform apply -replace=ADDRESS` there "+
			"with the address of that %s. If no workspace manages it, delete %s and create the %s "+
			"again", typ, ce.Name, object, typ, ce.Object, what)
	case errors.As(err, &he):
		return hostAccessRemedy(he, false)
	}
	return ""
}

// hostAccessRemedy says how to make a refused kubeconfig usable; fromConfig
// when it is written in this configuration rather than read from cluster data.
func hostAccessRemedy(he *kubeclient.HostAccessError, fromConfig bool) string {
	const inline = "Kubeconfigs kubeplay reads from cluster data (a cluster_api credential's Secret on its parent cluster, " +
		"a kubeconfig credential's catalog Secret) may hold only inline data: token, client-certificate-data, " +
		"client-key-data, certificate-authority-data"
	switch {
	case he.Field == "exec" && fromConfig:
		return "An exec plugin runs on every host that uses this credential, whenever it connects. Set " +
			"allow_exec_plugin = true if you trust the command there, or embed a token instead; each workspace that uses " +
			"the credential from the catalog must also pin it, by its exec_sha256, in its provider's exec_plugin_credentials"
	case fromConfig:
		return "The kubeconfig is stored in the catalog and read back by other workspaces and hosts, so it may hold only " +
			"inline data: token, client-certificate-data, client-key-data, certificate-authority-data. " +
			fmt.Sprintf("Replace %s with the data it points to", he.Field)
	case he.Field == "exec":
		return inline + ". Run the command yourself and embed the token it prints. Only a kind = \"kubeconfig\" " +
			"credential may run an exec plugin, and only when its definition sets allow_exec_plugin = true and the " +
			"provider of the workspace that uses it lists it in exec_plugin_credentials"
	}
	return inline + fmt.Sprintf(". Replace %s with the data it points to (Cluster API's own kubeconfig Secrets do so)", he.Field)
}

// execNotAllowedRemedy says how to let a catalog credential's exec plugin
// run, and why the provider asks.
func execNotAllowedRemedy(ne *credential.ExecNotAllowedError) string {
	return fmt.Sprintf("The kubeconfig was read from the catalog, which anyone who can write Secrets in the catalog "+
		"namespace can change, so its declaration allow_exec_plugin = true does not suffice: the workspace that uses the "+
		"credential must allow the command too. If you trust everyone who can write that namespace to run commands on "+
		"this host, set %q = %q (its exec_sha256; check it with the credential's owner) in exec_plugin_credentials "+
		"in this provider block; otherwise have the credential's owner embed a token in the kubeconfig instead of the "+
		"exec plugin", ne.Credential, ne.ExecSHA256)
}

// execPinRemedy says why a pinned exec plugin whose blocks changed is
// refused, signed or not, and how to allow the new ones.
func execPinRemedy(pe *credential.ExecPinMismatchError) string {
	return fmt.Sprintf("The plugin did not run. Whoever can write the catalog namespace, or holds the catalog key, can "+
		"change a credential's kubeconfig and sign it again, so this workspace pins the exec blocks it agreed to run. "+
		"If the credential's owner changed the command and you trust the new one, ask them for its exec_sha256 and set "+
		"%q = %q in exec_plugin_credentials; if nobody did, find out who can write the catalog namespace", pe.Credential, pe.Found)
}

// addHostAccessError reports a kubeconfig refused because it would run a
// program or read a file where Terraform runs; false when err is not that.
func addHostAccessError(diags *diag.Diagnostics, p path.Path, err error, fromConfig bool) bool {
	var ne *credential.ExecNotAllowedError
	if errors.As(err, &ne) {
		diags.AddAttributeError(p, "Exec Plugin Not Allowed", fmt.Sprintf("%s. %s.", upperFirst(err.Error()), execNotAllowedRemedy(ne)))
		return true
	}
	var pe *credential.ExecPinMismatchError
	if errors.As(err, &pe) {
		diags.AddAttributeError(p, "Exec Plugin Differs From Pin", fmt.Sprintf("%s. %s.", upperFirst(err.Error()), execPinRemedy(pe)))
		return true
	}
	var he *kubeclient.HostAccessError
	if !errors.As(err, &he) {
		return false
	}
	diags.AddAttributeError(p, "Unsafe Kubeconfig Refused",
		fmt.Sprintf("%s. %s.", upperFirst(err.Error()), hostAccessRemedy(he, fromConfig)))
	return true
}

// addCredentialRefused reports a catalog credential refused because its
// Secret was changed outside kubeplay; false when err is not that.
func addCredentialRefused(diags *diag.Diagnostics, p path.Path, err error) bool {
	if !errors.Is(err, catalog.ErrTampered) {
		return false
	}
	diags.AddAttributeError(p, refusalSummary(err), fmt.Sprintf("%s. %s.", upperFirst(err.Error()), refusalRemedy(err)))
	return true
}

// definitionResource is the resource type that writes a kind of definition,
// and the kind's name in a sentence.
func definitionResource(k catalog.Kind) (string, string) {
	switch k {
	case catalog.KindGroup:
		return "kubeplay_container_group", "container group"
	case catalog.KindLabel:
		return "kubeplay_node_label", "node label"
	}
	return "kubeplay_credential", "credential"
}

// addDefinitionRefused reports a group, label or credential that a run,
// warm pool or held node refuses because it was changed outside kubeplay,
// at the attribute that names it (node_label for a label, else at); false
// when err is not that.
func addDefinitionRefused(diags *diag.Diagnostics, at path.Path, err error) bool {
	var ce *catalog.Error
	if !errors.Is(err, catalog.ErrTampered) || !errors.As(err, &ce) {
		return false
	}
	detail := upperFirst(err.Error()) + "." // a credential's: credentialClients added the remedy
	if ce.Kind == catalog.KindLabel {
		at = path.Root("node_label")
	}
	if ce.Kind != catalog.KindCredential {
		detail = fmt.Sprintf("%s. Nothing was started: whoever changed it could choose the pod that receives the "+
			"run's secrets. %s.", upperFirst(err.Error()), refusalRemedy(err))
	}
	diags.AddAttributeError(at, refusalSummary(err), detail)
	return true
}

// warnInsecureTLS warns of a connection that does not verify its API
// server's certificate.
func warnInsecureTLS(diags *diag.Diagnostics, p path.Path, what, remedy string) {
	detail := fmt.Sprintf("With %s, kubeplay does not verify the API server's certificate: anyone on the network path "+
		"can pose as the API server, read the token or client key it is sent, and receive every playbook, variable and "+
		"secret that runs send. To verify the server, %s.", what, remedy)
	if p.Equal(path.Empty()) {
		diags.AddWarning("TLS Verification Disabled", detail)
		return
	}
	diags.AddAttributeWarning(p, "TLS Verification Disabled", detail)
}

// kindTitle is a kind of definition in a diagnostic's summary.
func kindTitle(k catalog.Kind) string {
	words := strings.Fields(string(k))
	for i, w := range words {
		words[i] = strings.ToUpper(w[:1]) + w[1:]
	}
	return strings.Join(words, " ")
}

// addCatalogError reports a failed catalog operation. A definition that is
// gone is the caller's to handle: it means different things to a resource
// and a data source.
func addCatalogError(diags *diag.Diagnostics, err error) {
	var e *catalog.Error
	if !errors.As(err, &e) {
		diags.AddError("Catalog Operation Failed", err.Error()+".")
		return
	}
	what := kindTitle(e.Kind)
	switch {
	case errors.Is(err, catalog.ErrAlreadyExists):
		diags.AddAttributeError(path.Root("name"), what+" Already Exists",
			fmt.Sprintf("%s. Import it with `terraform import <address> %s`, or choose another name.", e.Error(), e.Name))
	case errors.Is(err, catalog.ErrNotDefinition) && e.Op == "deleting":
		diags.AddWarning(what+" Left In Place",
			fmt.Sprintf("%s, so destroy left it in place and only forgot the resource.", e.Error()))
	case errors.Is(err, catalog.ErrTampered):
		diags.AddAttributeError(path.Root("name"), refusalSummary(err), fmt.Sprintf("%s. %s.", upperFirst(err.Error()), refusalRemedy(err)))
	case errors.Is(err, catalog.ErrNotDefinition):
		resource, _, _ := strings.Cut(e.Object, " ")
		diags.AddError("Invalid "+what+" "+resource, e.Error()+". Delete the object or fix it, then apply again.")
	default:
		diags.AddError(upperFirst(e.Op)+" "+what+" Failed", upperFirst(e.Error())+".")
	}
}

// addNotFound: a data source names a definition the catalog does not hold.
func addNotFound(diags *diag.Diagnostics, k catalog.Kind, name, namespace string) {
	diags.AddAttributeError(path.Root("name"), kindTitle(k)+" Not Found",
		fmt.Sprintf("No %s %q exists in catalog namespace %q. Check the name, and that the provider's "+
			"catalog_namespace matches the workspace that created it.", k, name, namespace))
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// privateDriftKey holds, in private state, what Read found changed outside
// Terraform, as a JSON string; ModifyPlan turns it into a forced update.
const privateDriftKey = "drift"

type privateSetter interface {
	SetKey(context.Context, string, []byte) diag.Diagnostics
}

// recordDrift stores what Read found changed outside Terraform; nothing
// clears it.
func recordDrift(ctx context.Context, private privateSetter, drift ...string) diag.Diagnostics {
	var found []string
	for _, d := range drift {
		if d != "" {
			found = append(found, d)
		}
	}
	if len(found) == 0 {
		return private.SetKey(ctx, privateDriftKey, nil)
	}
	b, err := json.Marshal(strings.Join(found, "; "))
	if err != nil {
		return diag.Diagnostics{diag.NewErrorDiagnostic("Recording Drift Failed", err.Error())}
	}
	return private.SetKey(ctx, privateDriftKey, b)
}

// planDrift warns of what Read recorded as changed outside Terraform, and
// reports whether there was any: the caller then forces an update by
// making a computed attribute unknown.
func planDrift(ctx context.Context, req resource.ModifyPlanRequest, diags *diag.Diagnostics, k catalog.Kind, name string) bool {
	if req.State.Raw.IsNull() {
		return false
	}
	raw, d := req.Private.GetKey(ctx, privateDriftKey)
	diags.Append(d...)
	var drift string
	if len(raw) == 0 || json.Unmarshal(raw, &drift) != nil || drift == "" {
		return false
	}
	diags.AddWarning(kindTitle(k)+" Changed Outside Terraform",
		fmt.Sprintf("The %s %q no longer holds what Terraform wrote: %s. Apply writes it again from the configuration.",
			k, name, drift))
	return true
}

// addCredentialCheckError reports why checking a credential against its
// cluster failed, at the attribute to look at.
func addCredentialCheckError(diags *diag.Diagnostics, spec credential.Spec, host string, err error) {
	secretAttr := map[string]string{
		credential.KindBearerToken: "bearer_token_wo", credential.KindKubeconfig: "kubeconfig_wo",
		credential.KindServiceAccount: "service_account_name", credential.KindProvider: "kind",
		credential.KindClusterAPI: "cluster_name",
	}[spec.Kind]
	tlsAttr, hostAttr := "ca_cert", "host"
	if spec.Kind != credential.KindBearerToken {
		tlsAttr, hostAttr = secretAttr, secretAttr
	}
	var ce *credential.CheckError
	if !errors.As(err, &ce) {
		ce = &credential.CheckError{Failure: credential.FailureOther, Host: host, Err: err}
	}
	switch ce.Failure {
	case credential.FailureUnauthorized:
		diags.AddAttributeError(path.Root(secretAttr), "Credential Rejected",
			fmt.Sprintf("The API server at %s answered 401 Unauthorized to credential %q: it does not accept its %s "+
				"(wrong, expired or revoked). Check %s.", host, spec.Name, secretAttr, secretAttr))
	case credential.FailureTLS:
		diags.AddAttributeError(path.Root(tlsAttr), "TLS Verification Failed",
			fmt.Sprintf("Connecting to %s with credential %q failed TLS verification: %v. Set %s to the PEM certificate "+
				"of the CA that signed the API server's certificate.", host, spec.Name, ce.Err, tlsAttr))
	case credential.FailureUnreachable:
		diags.AddAttributeError(path.Root(hostAttr), "Cluster Unreachable",
			fmt.Sprintf("Credential %q could not connect to %s: %v. Check that the host is right and that the API "+
				"server is running and reachable from where Terraform runs.", spec.Name, host, ce.Err))
	case credential.FailureUnsupported:
		diags.AddAttributeError(path.Root(hostAttr), "Kubernetes Version Unsupported",
			fmt.Sprintf("Credential %q cannot be used: the API server at %s answered that %v. Upgrade the cluster to "+
				"Kubernetes %s or later, or point the credential at one that is.", spec.Name, host, ce.Err, credential.OldestKubernetes))
	case credential.FailureForbidden:
		diags.AddAttributeError(path.Root(secretAttr), "Credential Forbidden",
			fmt.Sprintf("The API server at %s authenticated credential %q but refused it even self-review (403): %v. "+
				"Grant it the system:basic-user ClusterRole.", host, spec.Name, ce.Err))
	default:
		diags.AddError("Credential Check Failed",
			fmt.Sprintf("Checking credential %q against %s failed: %v.", spec.Name, host, ce.Err))
	}
}
