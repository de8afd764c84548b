/* Lists the DRM devices libdrm finds (drmGetDevices2) with their nodes and PCI ids: one line
 * per device, "<render node> <primary node> <domain>:<bus>:<dev>.<func> <vendor>:<device>
 * nodes <available_nodes> fd <drmGetDevice2 of the opened render node: same|differs|error>". */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <xf86drm.h>

/* What drmGetDevice2 says of an open of `node` (it starts from the fd's fstat). */
static const char *device_of_open(const char *node, drmDevicePtr listed)
{
    int fd = open(node, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return "error";
    drmDevicePtr dev = NULL;
    int ret = drmGetDevice2(fd, 0, &dev);
    close(fd);
    if (ret != 0 || !dev)
        return "error";
    const char *same = drmDevicesEqual(dev, listed) ? "same" : "differs";
    drmFreeDevice(&dev);
    return same;
}

int main(void)
{
    int count = drmGetDevices2(0, NULL, 0);
    if (count < 0) {
        fprintf(stderr, "drmGetDevices2 (count): %d\n", count);
        return 1;
    }
    drmDevicePtr *devices = calloc(count ? count : 1, sizeof(*devices));
    if (!devices)
        return 1;
    int got = drmGetDevices2(0, devices, count);
    if (got < 0) {
        fprintf(stderr, "drmGetDevices2: %d\n", got);
        free(devices);
        return 1;
    }
    printf("count %d\n", got);
    for (int i = 0; i < got; i++) {
        drmDevicePtr d = devices[i];
        if (d->bustype != DRM_BUS_PCI || !(d->available_nodes & (1 << DRM_NODE_RENDER))) {
            printf("other bustype %d nodes %#x\n", d->bustype, d->available_nodes);
            continue;
        }
        const char *primary =
            d->available_nodes & (1 << DRM_NODE_PRIMARY) ? d->nodes[DRM_NODE_PRIMARY] : "-";
        printf("%s %s %04x:%02x:%02x.%x %04x:%04x nodes %#x fd %s\n", d->nodes[DRM_NODE_RENDER],
               primary, d->businfo.pci->domain, d->businfo.pci->bus, d->businfo.pci->dev,
               d->businfo.pci->func, d->deviceinfo.pci->vendor_id, d->deviceinfo.pci->device_id,
               d->available_nodes, device_of_open(d->nodes[DRM_NODE_RENDER], d));
    }
    drmFreeDevices(devices, got);
    free(devices);
    return 0;
}
