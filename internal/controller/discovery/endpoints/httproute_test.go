package endpoints_test

import (
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
	"github.com/polycrate/polycrate-operator/internal/annotations"
	"github.com/polycrate/polycrate-operator/internal/controller/discovery/endpoints"
	"github.com/polycrate/polycrate-operator/internal/testutil"
)

func gateway(ns string) *gatewayv1.Gateway {
	return &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "acme-shop-https"},
		Spec: gatewayv1.GatewaySpec{GatewayClassName: "envoy", Listeners: []gatewayv1.Listener{
			{Name: "http", Protocol: gatewayv1.HTTPProtocolType, Port: 80},
			{Name: "https", Protocol: gatewayv1.HTTPSProtocolType, Port: 443},
			{Name: "admin", Protocol: gatewayv1.HTTPSProtocolType, Port: 8443},
		}}}
}

func route(ns, name, gwNS string, section *string, ann map[string]string, hosts ...string) *gatewayv1.HTTPRoute {
	r := &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: ann}}
	ref := gatewayv1.ParentReference{Name: "acme-shop-https", Namespace: ptr.To(gatewayv1.Namespace(gwNS))}
	if section != nil {
		ref.SectionName = ptr.To(gatewayv1.SectionName(*section))
	}
	r.Spec.ParentRefs = []gatewayv1.ParentReference{ref}
	for _, h := range hosts {
		r.Spec.Hostnames = append(r.Spec.Hostnames, gatewayv1.Hostname(h))
	}
	r.Spec.Rules = []gatewayv1.HTTPRouteRule{{Matches: []gatewayv1.HTTPRouteMatch{{Path: &gatewayv1.HTTPPathMatch{
		Type: ptr.To(gatewayv1.PathMatchPathPrefix), Value: ptr.To("/shop")}}}}}
	return r
}

// Ordered: the Gateway-API CRDs arrive once, after the operator started.
var _ = Describe("HTTPRoute discovery", Ordered, func() {
	var gwNS string

	It("starts without a restart when the Gateway-API CRDs are installed after the operator", func() {
		Expect(oe.Op.HTTPRoutes.Started()).To(BeFalse())
		dir, err := testutil.ModuleDir("sigs.k8s.io/gateway-api")
		Expect(err).NotTo(HaveOccurred())
		_, err = envtest.InstallCRDs(oe.Config, envtest.CRDInstallOptions{Paths: []string{filepath.Join(dir, "config", "crd", "standard")}})
		Expect(err).NotTo(HaveOccurred())
		Eventually(oe.Op.HTTPRoutes.Started, timeout, poll).Should(BeTrue())
		gwNS = freshNamespace()
		Expect(k8s.Create(ctx, gateway(gwNS))).To(Succeed())
	})

	It("takes TLS and port from the parent listener: sectionName, else the first HTTPS; the path from the first PathPrefix", func() {
		ns := freshNamespace()
		on := map[string]string{annotations.Monitor: "true"}
		Expect(k8s.Create(ctx, route(ns, "by-section", gwNS, ptr.To("http"), on, "plain.shop.example"))).To(Succeed())
		Expect(k8s.Create(ctx, route(ns, "first-https", gwNS, nil, on, "secure.shop.example"))).To(Succeed())
		Expect(k8s.Create(ctx, route(ns, "admin", gwNS, ptr.To("admin"), map[string]string{annotations.Monitor: "true", annotations.Path: "/readyz"}, "admin.shop.example"))).To(Succeed())
		Eventually(func() []string { return endpointNames(ns) }, timeout, poll).Should(HaveLen(3))
		plain := getEndpoint(ns, "plain-shop-example")
		Expect(*plain.Spec.TLS).To(BeFalse())
		Expect(plain.Spec.RemotePort).To(BeEquivalentTo(80))
		Expect(plain.Spec.Path).To(Equal("/shop"))
		Expect(plain.Labels).To(HaveKeyWithValue(v1.LabelEndpointSourceHTTPRoute, "by-section"))
		secure := getEndpoint(ns, "secure-shop-example")
		Expect(*secure.Spec.TLS).To(BeTrue())
		Expect(secure.Spec.RemotePort).To(BeEquivalentTo(443))
		admin := getEndpoint(ns, "admin-shop-example")
		Expect(admin.Spec.RemotePort).To(BeEquivalentTo(8443))
		Expect(admin.Spec.Path).To(Equal("/readyz")) // the annotation beats the PathPrefix
		Eventually(func() string { return getEndpointOrEmpty(ns, "secure-shop-example").Status.APIID }, timeout, poll).ShouldNot(BeEmpty())
		r := &gatewayv1.HTTPRoute{}
		Eventually(func() []string {
			_ = k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "first-https"}, r)
			return r.Finalizers
		}, timeout, poll).Should(ContainElement(v1.FinalizerHTTPRouteDiscovery))
	})

	It("wins a host over an Ingress, and the Ingress never takes it back", func() {
		ns := freshNamespace()
		Expect(k8s.Create(ctx, ingress(ns, "acme-shop", "nginx", map[string]string{annotations.Monitor: "true"}, "shop.acme.example"))).To(Succeed())
		Eventually(func() string {
			return getEndpointOrEmpty(ns, "shop-acme-example").Labels[v1.LabelEndpointSourceIngress]
		}, timeout, poll).Should(Equal("acme-shop"))
		Expect(k8s.Create(ctx, route(ns, "acme-shop", gwNS, ptr.To("https"), map[string]string{annotations.Monitor: "true"}, "shop.acme.example"))).To(Succeed())
		Eventually(func(g Gomega) {
			ep := getEndpointOrEmpty(ns, "shop-acme-example")
			g.Expect(ep.Labels).To(HaveKeyWithValue(v1.LabelEndpointSourceHTTPRoute, "acme-shop"))
			g.Expect(ep.Labels).NotTo(HaveKey(v1.LabelEndpointSourceIngress))
			g.Expect(ep.Spec.Path).To(Equal("/shop"))
		}, timeout, poll).Should(Succeed())
		Eventually(func() bool { return warned(ns, v1.ReasonHostClaimed, "HTTPRoute acme-shop") }, timeout, poll).Should(BeTrue())
		Consistently(func() string {
			return getEndpointOrEmpty(ns, "shop-acme-example").Labels[v1.LabelEndpointSourceHTTPRoute]
		}, "2s", "200ms").Should(Equal("acme-shop"))
	})

	It("re-queues its routes when the Gateway changes", func() {
		ns := freshNamespace()
		Expect(k8s.Create(ctx, route(ns, "moves", gwNS, ptr.To("https"), map[string]string{annotations.Monitor: "true"}, "moving.shop.example"))).To(Succeed())
		Eventually(func() int32 { return getEndpointOrEmpty(ns, "moving-shop-example").Spec.RemotePort }, timeout, poll).Should(BeEquivalentTo(443))
		Eventually(func() error {
			gw := &gatewayv1.Gateway{}
			if err := k8s.Get(ctx, client.ObjectKey{Namespace: gwNS, Name: "acme-shop-https"}, gw); err != nil {
				return err
			}
			gw.Spec.Listeners[1].Port = 9443
			return k8s.Update(ctx, gw)
		}, timeout, poll).Should(Succeed())
		Eventually(func() int32 { return getEndpointOrEmpty(ns, "moving-shop-example").Spec.RemotePort }, timeout, poll).Should(BeEquivalentTo(9443))
	})

	It("filters by the parent Gateway's class (gateway_classes)", func() {
		ns := freshNamespace()
		Expect(k8s.Create(ctx, route(ns, "classy", gwNS, nil, map[string]string{annotations.Monitor: "true"}, "classy.shop.example"))).To(Succeed())
		Eventually(func() []string { return endpointNames(ns) }, timeout, poll).Should(ConsistOf("classy-shop-example"))
		updateOC(func(oc *v1.OperatorConfig) { oc.Spec.EndpointDiscovery.GatewayClasses = []string{"istio"} })
		Eventually(func() []string { return endpointNames(ns) }, timeout, poll).Should(BeEmpty())
		updateOC(func(oc *v1.OperatorConfig) { oc.Spec.EndpointDiscovery.GatewayClasses = []string{"envoy"} })
		Eventually(func() []string { return endpointNames(ns) }, timeout, poll).Should(ConsistOf("classy-shop-example"))
		updateOC(func(oc *v1.OperatorConfig) { oc.Spec.EndpointDiscovery.GatewayClasses = nil })
	})

	It("deletes its Endpoints with the route", func() {
		ns := freshNamespace()
		r := route(ns, "short-lived", gwNS, nil, map[string]string{annotations.Monitor: "true"}, "brief.shop.example")
		Expect(k8s.Create(ctx, r)).To(Succeed())
		Eventually(func() string { return getEndpointOrEmpty(ns, "brief-shop-example").Status.APIID }, timeout, poll).ShouldNot(BeEmpty())
		Expect(k8s.Delete(ctx, r)).To(Succeed())
		Eventually(func() bool { return k8s.Get(ctx, client.ObjectKeyFromObject(r), &gatewayv1.HTTPRoute{}) != nil }, timeout, poll).Should(BeTrue())
		Expect(endpointNames(ns)).To(BeEmpty())
	})

	It("releases its routes when the Gateway-API CRD is removed, goes quiet, and starts again when it returns", func() {
		ns := freshNamespace()
		r := route(ns, "before-removal", gwNS, nil, map[string]string{annotations.Monitor: "true"}, "removal.shop.example")
		Expect(k8s.Create(ctx, r)).To(Succeed())
		Eventually(func() string { return getEndpointOrEmpty(ns, "removal-shop-example").Status.APIID }, timeout, poll).ShouldNot(BeEmpty())

		// Deleting the CRD deletes the routes; discovery still runs while the CRD
		// terminates, so it releases its finalizers and the CRD can go.
		Expect(k8s.Delete(ctx, &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: endpoints.HTTPRouteCRD}})).To(Succeed())
		Eventually(oe.Op.HTTPRoutes.Started, timeout, poll).Should(BeFalse())
		Eventually(func() error {
			return k8s.Get(ctx, client.ObjectKey{Name: endpoints.HTTPRouteCRD}, &apiextensionsv1.CustomResourceDefinition{})
		}, timeout, poll).ShouldNot(Succeed())
		Eventually(func() []string { return endpointNames(ns) }, timeout, poll).Should(BeEmpty())

		dir, err := testutil.ModuleDir("sigs.k8s.io/gateway-api")
		Expect(err).NotTo(HaveOccurred())
		_, err = envtest.InstallCRDs(oe.Config, envtest.CRDInstallOptions{Paths: []string{filepath.Join(dir, "config", "crd", "standard")}})
		Expect(err).NotTo(HaveOccurred())
		Eventually(oe.Op.HTTPRoutes.Started, timeout, poll).Should(BeTrue())
		again := route(ns, "after-return", gwNS, nil, map[string]string{annotations.Monitor: "true"}, "return.shop.example")
		Expect(k8s.Create(ctx, again)).To(Succeed())
		Eventually(func() string { return getEndpointOrEmpty(ns, "return-shop-example").Status.APIID }, timeout, poll).ShouldNot(BeEmpty())
	})
})
