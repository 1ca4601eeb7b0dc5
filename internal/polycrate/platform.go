package polycrate

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// LoadBalancerPort is one entry of a load balancer instance's ports (reference
// inventory §7.3: [{port, name, protocol, target_port}]).
type LoadBalancerPort struct {
	Port       int32  `json:"port"`
	Name       string `json:"name,omitempty"`
	Protocol   string `json:"protocol,omitempty"`
	TargetPort int32  `json:"target_port"`
}

// IPAddressSimple is the allocated public address object of an instance.
type IPAddressSimple struct {
	ID        string  `json:"id"`
	Name      string  `json:"name"`
	IPAddress *string `json:"ip_address"`
}

// LoadBalancerDeployment is one region's deployment of an instance.
type LoadBalancerDeployment struct {
	DeploymentStatus   string  `json:"deployment_status"`
	DeploymentError    *string `json:"deployment_error"`
	LoadBalancerRegion string  `json:"loadbalancer_region"`
}

// LoadBalancer is the detail model of /api/v1/loadbalancers/instances/.
type LoadBalancer struct {
	Meta
	StateReason       *string                  `json:"state_reason"`
	Ports             []LoadBalancerPort       `json:"ports"`
	Config            *string                  `json:"config"`
	ConsumerMeta      any                      `json:"consumer_meta"`
	IPAddress         *IPAddressSimple         `json:"ip_address"`
	IPAddressValue    *string                  `json:"ip_address_value"`
	DeploymentsReady  int                      `json:"deployments_ready"`
	DeploymentsTotal  int                      `json:"deployments_total"`
	RegionDeployments []LoadBalancerDeployment `json:"region_deployments"`
}

// Address is the instance's public address, "" while none is allocated.
func (lb *LoadBalancer) Address() string {
	if lb.IPAddressValue != nil && *lb.IPAddressValue != "" {
		return *lb.IPAddressValue
	}
	if lb.IPAddress != nil && lb.IPAddress.IPAddress != nil {
		return *lb.IPAddress.IPAddress
	}
	return ""
}

// LoadBalancerRow is a list row.
type LoadBalancerRow struct {
	Row
	IPAddressValue *string `json:"ip_address_value"`
	IsDeleted      bool    `json:"is_deleted"`
}

// LoadBalancerCreateRequest is LoadbalancerInstanceCreateRequest: workspace and
// organization are required even for agent tokens (their own ids, from the health
// report); there is no name field.
type LoadBalancerCreateRequest struct {
	Workspace    string            `json:"workspace"`
	Organization string            `json:"organization"`
	DisplayName  *string           `json:"display_name,omitempty"`
	Config       *string           `json:"config,omitempty"`
	Ports        any               `json:"ports,omitempty"`
	ConsumerMeta any               `json:"consumer_meta,omitempty"`
	Labels       map[string]string `json:"labels,omitempty"`
	Annotations  map[string]string `json:"annotations,omitempty"`
}

// LoadBalancerCreateResponse is LoadbalancerInstanceCreate.
type LoadBalancerCreateResponse struct {
	ID          string  `json:"id"`
	DisplayName *string `json:"display_name"`
}

// LoadBalancerUpdateRequest is LoadbalancerInstanceUpdateRequest.
type LoadBalancerUpdateRequest struct {
	Config      *string           `json:"config,omitempty"`
	Ports       any               `json:"ports,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// LoadBalancers is /api/v1/loadbalancers/instances/ (create: CreateLoadBalancer).
func (c *Client) LoadBalancers() Resource[LoadBalancer, LoadBalancerRow, LoadBalancerUpdateRequest] {
	return newResource[LoadBalancer, LoadBalancerRow, LoadBalancerUpdateRequest](c, "loadbalancers/instances", "/api/v1/loadbalancers/instances/")
}

// CreateLoadBalancer creates a load balancer instance.
func (c *Client) CreateLoadBalancer(ctx context.Context, r LoadBalancerCreateRequest) (*LoadBalancerCreateResponse, error) {
	out := &LoadBalancerCreateResponse{}
	return out, c.create(ctx, "loadbalancers/instances", "/api/v1/loadbalancers/instances/", r, out)
}

// Pop is a point of presence.
type Pop struct {
	Meta
	Kind string  `json:"kind"`
	City *string `json:"city"`
}

// Pops is /api/v1/pops/ (read-only for agents).
func (c *Client) Pops() Resource[Pop, Row, struct{}] {
	return newResource[Pop, Row, struct{}](c, "pops", "/api/v1/pops/")
}

// Workspace is the detail model of /api/v1/workspaces/.
type Workspace struct {
	Meta
	Pop *Ref `json:"pop"`
}

// Workspaces is /api/v1/workspaces/ (read-only for agents).
func (c *Client) Workspaces() Resource[Workspace, Row, struct{}] {
	return newResource[Workspace, Row, struct{}](c, "workspaces", "/api/v1/workspaces/")
}

// FindWorkspace finds a workspace by exact name and organization name in one request.
func (c *Client) FindWorkspace(ctx context.Context, name, organization string) (*Row, error) {
	return findOne(c.Workspaces().List(ctx, Query("name_exact", name, "organization_name", organization)))
}

// Organizations is /api/v1/organizations/ (read-only here: the real API takes
// multipart bodies for writes).
func (c *Client) Organizations() Resource[Meta, Row, struct{}] {
	return newResource[Meta, Row, struct{}](c, "organizations", "/api/v1/organizations/")
}

// Block is the detail model of /api/v1/blocks/.
type Block struct {
	Meta
	Kind             string  `json:"kind"`
	Version          *string `json:"version"`
	InstalledVersion *string `json:"installed_version"`
}

// BlockRow is a list row.
type BlockRow struct {
	Row
	Kind    string  `json:"kind"`
	Version *string `json:"version"`
}

// Blocks is /api/v1/blocks/.
func (c *Client) Blocks() Resource[Block, BlockRow, struct{}] {
	return newResource[Block, BlockRow, struct{}](c, "blocks", "/api/v1/blocks/")
}

// FindBlock finds a block by exact name in a workspace in one request.
func (c *Client) FindBlock(ctx context.Context, name, workspaceID string) (*BlockRow, error) {
	return findOne(c.Blocks().List(ctx, Query("name_exact", name, "workspaces", workspaceID)))
}

// Downtime is the detail model of /api/v1/downtimes/.
type Downtime struct {
	ID              string           `json:"id"`
	Name            string           `json:"name"`
	Kind            string           `json:"kind"`
	Severity        string           `json:"severity"`
	IsActive        bool             `json:"is_active"`
	StartedAt       *time.Time       `json:"started_at"`
	EndedAt         *time.Time       `json:"ended_at"`
	AffectedObjects []map[string]any `json:"affected_objects"`
}

// Downtimes is /api/v1/downtimes/ (created by the API itself).
func (c *Client) Downtimes() Resource[Downtime, Downtime, struct{}] {
	return newResource[Downtime, Downtime, struct{}](c, "downtimes", "/api/v1/downtimes/")
}

// SystemConfig is /api/v1/system/config/: the typed keys the operator reads, plus
// the rollout keys of seed 000 (an extension; absent from the published schema).
type SystemConfig struct {
	DefaultS3BucketCluster    string   `json:"default_s3_bucket_cluster"`
	SystemName                string   `json:"SYSTEM_NAME"`
	OperatorBlockVersion      *string  `json:"OPERATOR_BLOCK_VERSION,omitempty"`
	OperatorRolloutPercentage *float64 `json:"OPERATOR_ROLLOUT_PERCENTAGE,omitempty"`
}

// GetSystemConfig reads the system configuration.
func (c *Client) GetSystemConfig(ctx context.Context) (*SystemConfig, error) {
	out := &SystemConfig{}
	return out, c.getJSON(ctx, "system/config", "/api/v1/system/config/", nil, out)
}

// PatchSystemConfig changes keys (platform tokens only); returns the updated keys.
func (c *Client) PatchSystemConfig(ctx context.Context, values map[string]any) ([]string, error) {
	var out struct {
		UpdatedKeys []string `json:"updated_keys"`
	}
	return out.UpdatedKeys, c.send(ctx, "system/config", http.MethodPatch, "/api/v1/system/config/", values, &out)
}

// BlockRollout is the detail model of /api/v1/block-rollouts/.
type BlockRollout struct {
	Meta
	BatchIdentifier string `json:"batch_identifier"`
	Status          string `json:"status"`
}

// BlockRollouts is /api/v1/block-rollouts/ (read-only for agents).
func (c *Client) BlockRollouts() Resource[BlockRollout, Row, struct{}] {
	return newResource[BlockRollout, Row, struct{}](c, "block-rollouts", "/api/v1/block-rollouts/")
}

// RolloutCluster is one row of the operator-rollout aggregate (extension, seed 000).
type RolloutCluster struct {
	ClusterID        string   `json:"cluster_id"`
	ClusterName      string   `json:"cluster_name"`
	WorkspaceName    string   `json:"workspace_name"`
	InstalledVersion *string  `json:"installed_version"`
	DesiredVersion   *string  `json:"desired_version"`
	State            string   `json:"state"`
	RolloutStatus    string   `json:"rollout_status"`
	Blockers         []string `json:"blockers"`
	Heartbeat        *string  `json:"heartbeat"`
	Paused           bool     `json:"paused"`
	Forced           bool     `json:"forced"`
	Maintenance      string   `json:"maintenance"`
}

// OperatorRollout is the operator-rollout aggregate (extension, platform tokens).
type OperatorRollout struct {
	TargetVersion     string           `json:"target_version"`
	RolloutPercentage float64          `json:"rollout_percentage"`
	Clusters          []RolloutCluster `json:"clusters"`
	Versions          map[string]int   `json:"versions"`
}

// GetOperatorRollout reads the aggregate. A 404 means the API does not offer this
// extension (see IsNotFound).
func (c *Client) GetOperatorRollout(ctx context.Context) (*OperatorRollout, error) {
	out := &OperatorRollout{}
	return out, c.getJSON(ctx, "operator-rollout", "/api/v1/operator-rollout/", nil, out)
}

// ForceOperatorUpdate and PauseOperatorRollout steer one cluster (extension).
func (c *Client) ForceOperatorUpdate(ctx context.Context, clusterID string) (*RolloutCluster, error) {
	out := &RolloutCluster{}
	return out, c.send(ctx, "operator-rollout", http.MethodPost, "/api/v1/operator-rollout/"+url.PathEscape(clusterID)+"/force-update/", nil, out)
}

// PauseOperatorRollout holds one cluster back from the rollout (extension).
func (c *Client) PauseOperatorRollout(ctx context.Context, clusterID string) (*RolloutCluster, error) {
	out := &RolloutCluster{}
	return out, c.send(ctx, "operator-rollout", http.MethodPost, "/api/v1/operator-rollout/"+url.PathEscape(clusterID)+"/pause/", nil, out)
}
