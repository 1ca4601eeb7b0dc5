package polycrate

import (
	"context"
	"net/url"
)

// Bucket is the detail model of /api/v1/s3/buckets/. It carries no secrets: those
// come only from Credentials.
type Bucket struct {
	Meta
	Region     *Ref    `json:"region"`
	S3Endpoint *string `json:"s3_endpoint"`
	S3Region   *string `json:"s3_region"`
}

// BucketRow is a list row.
type BucketRow struct {
	Row
	Region *Ref `json:"region"`
}

// BucketCreateRequest is S3BucketRegionRequest. Region is a region UUID from
// Regions(); nil uses the API's default S3 cluster. Agent tokens leave workspace
// and organization out (they come from the token).
type BucketCreateRequest struct {
	Name         string            `json:"name"`
	Region       *string           `json:"region,omitempty"`
	Labels       map[string]string `json:"labels,omitempty"`
	Annotations  map[string]string `json:"annotations,omitempty"`
	CORSAllowAll *bool             `json:"cors_allow_all,omitempty"`
}

// BucketCreateResponse is S3BucketRegionResponse.
type BucketCreateResponse struct {
	ID     string `json:"id"`
	Name   string `json:"name"`
	Region *Ref   `json:"region"`
	State  string `json:"state"`
}

// BucketUpdateRequest is S3BucketUpdateRequest.
type BucketUpdateRequest struct {
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// BucketCredential is one access key with its secret.
type BucketCredential struct {
	ID        string  `json:"id"`
	Type      string  `json:"type"`
	AccessKey *string `json:"access_key"`
	SecretKey *string `json:"secret_key"`
}

// Region is an S3 region (GET /api/v1/s3/regions/ answers a plain array).
type Region struct {
	ID          string  `json:"id"`
	Region      *string `json:"region"`
	Endpoint    string  `json:"endpoint"`
	Name        string  `json:"name"`
	DisplayName *string `json:"display_name"`
}

// Buckets is /api/v1/s3/buckets/ (create: CreateBucket; update: UpdateBucket).
func (c *Client) Buckets() Resource[Bucket, BucketRow, BucketUpdateRequest] {
	return newResource[Bucket, BucketRow, BucketUpdateRequest](c, "s3/buckets", "/api/v1/s3/buckets/")
}

// CreateBucket creates a bucket (201 S3BucketRegionResponse). A name taken on the
// same S3 cluster answers 409.
func (c *Client) CreateBucket(ctx context.Context, r BucketCreateRequest) (*BucketCreateResponse, error) {
	out := &BucketCreateResponse{}
	return out, c.create(ctx, "s3/buckets", "/api/v1/s3/buckets/", r, out)
}

// BucketCredentials returns a bucket's access keys with secrets (legacy envelope
// success / data.credentials / meta).
func (c *Client) BucketCredentials(ctx context.Context, bucketID string) ([]BucketCredential, error) {
	var env struct {
		Success *bool `json:"success"`
		Data    struct {
			Credentials []BucketCredential `json:"credentials"`
		} `json:"data"`
	}
	err := c.getJSON(ctx, "s3/buckets", "/api/v1/s3/buckets/"+url.PathEscape(bucketID)+"/credentials/", nil, &env)
	return env.Data.Credentials, err
}

// Regions lists the S3 regions available for bucket creation.
func (c *Client) Regions(ctx context.Context) ([]Region, error) {
	var out []Region
	return out, c.getJSON(ctx, "s3/regions", "/api/v1/s3/regions/", nil, &out)
}

// FindBucket finds the workspace's bucket with this exact name; nil when none.
func (c *Client) FindBucket(ctx context.Context, name string) (*BucketRow, error) {
	return findOne(c.Buckets().List(ctx, Query("name_exact", name)))
}
