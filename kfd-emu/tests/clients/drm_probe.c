/* Lists the DRM devices libdrm finds (drmGetDevices2) with their render node and PCI ids:
 * one line per device, "<render node> <domain>:<bus>:<dev>.<func> <vendor>:<device>". */
#include <stdio.h>
#include <stdlib.h>
#include <xf86drm.h>

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
        printf("%s %04x:%02x:%02x.%x %04x:%04x\n", d->nodes[DRM_NODE_RENDER],
               d->businfo.pci->domain, d->businfo.pci->bus, d->businfo.pci->dev,
               d->businfo.pci->func, d->deviceinfo.pci->vendor_id,
               d->deviceinfo.pci->device_id);
    }
    drmFreeDevices(devices, got);
    free(devices);
    return 0;
}
