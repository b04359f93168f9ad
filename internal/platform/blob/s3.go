package blob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"time"

	"gale/internal/platform/clock"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
)

// S3Config locates the bucket of an S3-compatible store (AWS S3, MinIO, Ceph, ...).
type S3Config struct {
	// Endpoint is the service's URL ("https://minio.example.com:9000"); empty means AWS S3.
	Endpoint string
	// Region signs the requests. Empty means the AWS default chain's (AWS_REGION, shared
	// config), else us-east-1, which MinIO and most S3-compatible stores accept.
	Region string
	// Bucket holds the blobs; it must exist. Required.
	Bucket string
	// Prefix goes before every key, with a "/" between ("gale" stores "tickets/x" as
	// "gale/tickets/x"), so that the bucket can hold other things too.
	Prefix string
	// AccessKeyID and SecretAccessKey are static credentials, both or neither: with neither,
	// the AWS default chain (environment, shared files, instance or task role) provides them.
	AccessKeyID     string
	SecretAccessKey string
	// PathStyle puts the bucket in the URL's path (endpoint/bucket/key) rather than in its host
	// name (bucket.endpoint/key), as MinIO, Ceph and most self-hosted stores need. It is the
	// default of the server's configuration; virtual-hosted style suits AWS S3.
	PathStyle bool
}

// validate reports the first setting that is missing or malformed, by its field name.
func (c S3Config) validate() error {
	switch {
	case c.Bucket == "":
		return errors.New("s3 blob store: Bucket is not set")
	case c.AccessKeyID != "" && c.SecretAccessKey == "":
		return errors.New("s3 blob store: SecretAccessKey is not set (AccessKeyID is)")
	case c.AccessKeyID == "" && c.SecretAccessKey != "":
		return errors.New("s3 blob store: AccessKeyID is not set (SecretAccessKey is)")
	}
	if c.Endpoint != "" {
		u, err := url.Parse(c.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("s3 blob store: Endpoint %q is not an http:// or https:// URL", c.Endpoint)
		}
	}
	return nil
}

// Object metadata (x-amz-meta-*) that keeps what Info holds beyond S3's own headers.
const (
	metaSHA256  = "sha256"
	metaCreated = "created-at"
)

type s3Store struct {
	client *s3.Client
	bucket string
	prefix string
	clock  clock.Clock
}

// NewS3 returns a Store that keeps blobs as objects of an S3-compatible bucket. It makes no
// request: a wrong bucket or credentials show at the first use.
func NewS3(ctx context.Context, cfg S3Config) (Store, error) { return newS3(ctx, cfg, clock.System{}) }

func newS3(ctx context.Context, cfg S3Config, clk clock.Clock) (*s3Store, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	opts := []func(*config.LoadOptions) error{
		// The SDK otherwise adds CRC checksums to every upload and expects them on downloads,
		// which S3-compatible stores do not all support; SigV4 still signs each body's SHA-256.
		config.WithRequestChecksumCalculation(aws.RequestChecksumCalculationWhenRequired),
		config.WithResponseChecksumValidation(aws.ResponseChecksumValidationWhenRequired),
	}
	if cfg.Region != "" {
		opts = append(opts, config.WithRegion(cfg.Region))
	}
	if cfg.AccessKeyID != "" {
		opts = append(opts, config.WithCredentialsProvider(
			credentials.NewStaticCredentialsProvider(cfg.AccessKeyID, cfg.SecretAccessKey, "")))
	}
	awsCfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("s3 blob store: load AWS configuration: %w", err)
	}
	if awsCfg.Region == "" {
		awsCfg.Region = "us-east-1"
	}
	client := s3.NewFromConfig(awsCfg, func(o *s3.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
		o.UsePathStyle = cfg.PathStyle
	})
	prefix := cfg.Prefix
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	return &s3Store{client: client, bucket: cfg.Bucket, prefix: prefix, clock: clk}, nil
}

func (s *s3Store) object(key string) *string { return aws.String(s.prefix + key) }

func (s *s3Store) Put(ctx context.Context, key string, r io.Reader, contentType string) (Info, error) {
	if err := validateKey(key); err != nil {
		return Info{}, fmt.Errorf("put blob %q: %w", key, err)
	}
	if contentType == "" {
		contentType = defaultContentType
	}
	info, err := s.put(ctx, key, r, contentType)
	if err != nil {
		return Info{}, fmt.Errorf("put blob %q: %w", key, err)
	}
	return info, nil
}

// put spools r to a temporary file before the upload: the SHA-256 goes in the object's
// metadata, sent before the content, and a file is a body the SDK can rewind to retry. The
// file is in os.TempDir(), which for large blobs should be on disk rather than in memory. A
// failed spool uploads nothing, and S3 replaces an object whole or not at all.
func (s *s3Store) put(ctx context.Context, key string, r io.Reader, contentType string) (Info, error) {
	f, err := os.CreateTemp("", "gale-blob-*")
	if err != nil {
		return Info{}, err
	}
	defer func() {
		f.Close()
		os.Remove(f.Name())
	}()
	size, sum, err := readChunks(ctx, r, func(chunk []byte) error {
		_, err := f.Write(chunk)
		return err
	})
	if err != nil {
		return Info{}, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return Info{}, err
	}
	info := Info{Key: key, Size: size, ContentType: contentType, SHA256: sum, CreatedAt: s.clock.Now()}
	_, err = s.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket:        &s.bucket,
		Key:           s.object(key),
		Body:          f,
		ContentLength: aws.Int64(size),
		ContentType:   aws.String(contentType),
		Metadata:      map[string]string{metaSHA256: sum, metaCreated: info.CreatedAt.Format(time.RFC3339Nano)},
	}, withPayloadHash(sum))
	if err != nil {
		return Info{}, err
	}
	return info, nil
}

// withPayloadHash signs the upload with the SHA-256 computed while spooling: the SDK would
// otherwise read the whole file once more to compute it (over plain HTTP) or send the body
// unsigned (over HTTPS). Either way the store checks the body against it.
func withPayloadHash(sum string) func(*s3.Options) {
	return func(o *s3.Options) {
		o.APIOptions = append(o.APIOptions, func(stack *middleware.Stack) error {
			return stack.Finalize.Insert(middleware.FinalizeMiddlewareFunc("GalePayloadHash",
				func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
					return next.HandleFinalize(v4.SetPayloadHash(ctx, sum), in)
				}), "ComputePayloadHash", middleware.Before)
		})
	}
}

func (s *s3Store) Open(ctx context.Context, key string) (io.ReadCloser, Info, error) {
	if err := validateKey(key); err != nil {
		return nil, Info{}, fmt.Errorf("open blob %q: %w", key, err)
	}
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &s.bucket, Key: s.object(key)})
	if err != nil {
		return nil, Info{}, fmt.Errorf("open blob %q: %w", key, s3Error(err))
	}
	return out.Body, objectInfo(key, out.ContentLength, out.ContentType, out.Metadata), nil
}

func (s *s3Store) Stat(ctx context.Context, key string) (Info, error) {
	if err := validateKey(key); err != nil {
		return Info{}, fmt.Errorf("stat blob %q: %w", key, err)
	}
	out, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &s.bucket, Key: s.object(key)})
	if err != nil {
		return Info{}, fmt.Errorf("stat blob %q: %w", key, s3Error(err))
	}
	return objectInfo(key, out.ContentLength, out.ContentType, out.Metadata), nil
}

// Delete relies on S3 answering success for a missing object.
func (s *s3Store) Delete(ctx context.Context, key string) error {
	if err := validateKey(key); err != nil {
		return fmt.Errorf("delete blob %q: %w", key, err)
	}
	if _, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &s.bucket, Key: s.object(key)}); err != nil {
		return fmt.Errorf("delete blob %q: %w", key, err)
	}
	return nil
}

func objectInfo(key string, size *int64, contentType *string, meta map[string]string) Info {
	created, _ := time.Parse(time.RFC3339Nano, meta[metaCreated])
	return Info{
		Key:         key,
		Size:        aws.ToInt64(size),
		ContentType: aws.ToString(contentType),
		SHA256:      meta[metaSHA256],
		CreatedAt:   created.UTC(),
	}
}

// s3Error turns S3's answers for a missing object (NoSuchKey to a GET, a bare 404 NotFound to
// a HEAD) into ErrNotFound.
func s3Error(err error) error {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) && (apiErr.ErrorCode() == "NoSuchKey" || apiErr.ErrorCode() == "NotFound") {
		return ErrNotFound
	}
	return err
}
